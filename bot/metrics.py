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
