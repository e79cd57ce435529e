"""Global security advisories (`GET /advisories`): the GitHub Advisory Database, read leniently."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class AdvisoryVulnerability(_Lenient):
    """One package an advisory affects, with the affected versions and the first fixed one."""

    ecosystem: str = Field(description="`pip`, `npm`, … (GitHub's ecosystem names).")
    name: str = Field(description="The package's name in its registry.")
    vulnerable_version_range: str | None = Field(
        default=None, description="Affected versions, e.g. `>= 2.0.0, < 2.3.1`."
    )
    first_patched_version: str | None = Field(default=None, description="The first fixed version, if any.")


class Advisory(_Lenient):
    """A reviewed or malware advisory of the GitHub Advisory Database."""

    ghsa_id: str = Field(description="GHSA-xxxx-xxxx-xxxx.")
    cve_id: str | None = Field(default=None, description="The CVE id, when there is one.")
    summary: str = Field(default="", description="One line on what is wrong.")
    severity: str = Field(default="unknown", description="`low`, `medium`, `high`, `critical` or `unknown`.")
    type: str = Field(default="reviewed", description="`reviewed`, `malware` or `unreviewed`.")
    html_url: str = Field(default="", description="The advisory's page.")
    withdrawn: bool = Field(default=False, description="Withdrawn advisories no longer apply.")
    vulnerabilities: list[AdvisoryVulnerability] = Field(default_factory=list)

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Advisory:
        found = []
        for item in data.get("vulnerabilities") or []:
            package = (item or {}).get("package") or {}
            if package.get("ecosystem") and package.get("name"):
                patched = item.get("first_patched_version")
                if isinstance(patched, dict):  # older shapes: {"identifier": "2.20.0"}
                    patched = patched.get("identifier")
                found.append(
                    AdvisoryVulnerability(
                        ecosystem=package["ecosystem"],
                        name=package["name"],
                        vulnerable_version_range=item.get("vulnerable_version_range"),
                        first_patched_version=patched,
                    )
                )
        return cls(
            ghsa_id=data["ghsa_id"],
            cve_id=data.get("cve_id"),
            summary=data.get("summary") or "",
            severity=data.get("severity") or "unknown",
            type=data.get("type") or "reviewed",
            html_url=data.get("html_url") or "",
            withdrawn=bool(data.get("withdrawn_at")),
            vulnerabilities=found,
        )
