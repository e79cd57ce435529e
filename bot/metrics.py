"""Prometheus metrics, held in a registry per app so tests and apps never share counters."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


@dataclass
class Metrics:
    """The counters and histograms the server exports on `/metrics`."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.deliveries = Counter(
            "plan_cascade_deliveries_total",
            "Webhook deliveries by event and outcome (accepted, duplicate, rejected).",
            ["event", "outcome"],
            registry=self.registry,
        )
        self.jobs = Counter(
            "plan_cascade_jobs_total",
            "Jobs finished by kind and outcome (done, retry, dead).",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.job_latency = Histogram(
            "plan_cascade_job_latency_seconds",
            "Time from enqueue to the end of a job.",
            ["kind"],
            registry=self.registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800),
        )
        self.queue_depth = Gauge(
            "plan_cascade_queue_depth",
            "Jobs waiting to run (queued, due or not).",
            registry=self.registry,
        )
        self.dead_jobs = Gauge(
            "plan_cascade_dead_jobs",
            "Jobs that failed every attempt and need a look.",
            registry=self.registry,
        )
        self.github_server_retries = Counter(
            "plan_cascade_github_server_retries_total",
            "Requests sent again after GitHub answered 5xx, timed out or dropped the connection, by kind.",
            ["kind"],
            registry=self.registry,
        )
        self.github_adopted = Counter(
            "plan_cascade_github_adopted_total",
            "Things GitHub made though it answered an error: found and used, not made again (by kind).",
            ["kind"],
            registry=self.registry,
        )
        self.github_pause_seconds = Counter(
            "plan_cascade_github_rate_limit_pause_seconds_total",
            "Seconds an installation's requests were paused by GitHub's rate limits, by limit.",
            ["limit"],
            registry=self.registry,
        )
        self.pruned = Counter(
            "plan_cascade_pruned_rows_total",
            "Rows removed past PLAN_CASCADE_RETENTION_DAYS, by table (jobs, deliveries).",
            ["table"],
            registry=self.registry,
        )
        self.refusals = Counter(
            "plan_cascade_refusals_total",
            "Commands refused for want of permission: answered (posted) or not again (silenced).",
            ["outcome"],
            registry=self.registry,
        )
        self.github_writes_skipped = Counter(
            "plan_cascade_github_writes_skipped_total",
            "Writes the write queue did not send: a 👀 whose answer went first (ack), an edit a "
            "newer one replaced (edit).",
            ["kind"],
            registry=self.registry,
        )
        self.egress_blocked = Counter(
            "plan_cascade_egress_blocked_total",
            "Requests the egress proxy refused, by whose they were (agent, setup).",
            ["proxy"],
            registry=self.registry,
        )
        self.schedule_runs = Counter(
            "plan_cascade_schedule_runs_total",
            "Runs of repositories' schedules, by outcome: opened (an issue, planned), skipped (the last "
            "run's issue still waits for approval), failed.",
            ["outcome"],
            registry=self.registry,
        )
        self.redeliveries = Counter(
            "plan_cascade_redeliveries_requested_total",
            "Webhook deliveries that failed and were asked of GitHub again.",
            registry=self.registry,
        )
