"""Multi-user mode's configuration: whether people sign in, who may, who is an admin, and each
person's limits.

Sign-in is on when Streamlit's secrets file has an `[auth]` table (the OpenID Connect provider
`st.login` uses: docs/teams.md shows Keycloak, Authentik, Google and GitHub through an OIDC
bridge). Every process reads the same file, so the web app, `thoughtmap serve`, `thoughtmap mcp`
and the CLI agree on the mode. The file is `THOUGHTMAP_SECRETS_FILE`, else the first of
`./.streamlit/secrets.toml` and `~/.streamlit/secrets.toml` that exists (Streamlit's own places).

Who may sign in and who is an admin come from the environment or, under the same names, from the
secrets file's top level:
- THOUGHTMAP_ADMINS: emails of the admins (they see every run, and the first to sign in takes over
  what was made before sign-in was on);
- THOUGHTMAP_ALLOWED_EMAILS: emails and `@domain`s that may sign in besides the admins, or `*` for
  anyone the provider signs in (say so on purpose: with Google that is anyone with an account);
- THOUGHTMAP_USER_MAX_ACTIVE_RUNS, THOUGHTMAP_USER_MAX_COST: each person's limits (unset: none).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from engine.config_values import ConfigError, number

ANYONE = "*"
# THOUGHTMAP_USER_MAX_COST counts what a person's runs spent over this long.
SPENDING_WINDOW = timedelta(days=30)


class TeamSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    sign_in: bool = False
    admins: tuple[str, ...] = ()
    allowed: tuple[str, ...] = ()  # emails and "@domain"s, lower-case; ("*",): anyone
    max_active_runs: int | None = None
    max_cost: float | None = None
    secrets_file: Path | None = None

    def is_admin(self, email: str) -> bool:
        return _clean(email) in self.admins

    def allows(self, email: str) -> bool:
        """May this person sign in (their provider has checked that the email is theirs)."""
        email = _clean(email)
        if not email or "@" not in email:
            return False
        domain = "@" + email.rsplit("@", 1)[1]
        return ANYONE in self.allowed or email in self.admins or email in self.allowed or domain in self.allowed


def _clean(email: str) -> str:
    return email.strip().lower()


def secrets_file(env: Mapping[str, str], cwd: Path | None = None) -> Path | None:
    if env.get("THOUGHTMAP_SECRETS_FILE"):
        path = Path(env["THOUGHTMAP_SECRETS_FILE"]).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"THOUGHTMAP_SECRETS_FILE={str(path)!r} cannot be used: there is no such file. "
                "Point it at your secrets.toml, or unset it"
            )
        return path
    for path in ((cwd or Path.cwd()) / ".streamlit" / "secrets.toml", Path.home() / ".streamlit" / "secrets.toml"):
        if path.is_file():
            return path
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"the secrets file {path} cannot be read: {exc}. Fix it, or move it away") from exc


def _emails(values: Mapping[str, str], name: str, *, anyone: bool) -> tuple[str, ...]:
    entries = tuple(dict.fromkeys(e for e in (_clean(p) for p in (values.get(name) or "").split(",")) if e))
    for entry in entries:
        if entry == ANYONE and anyone:
            continue
        if "@" not in entry or entry.count("@") > 1 or entry.endswith("@"):
            what = "an email, an @domain" + (" or *" if anyone else "") if anyone else "an email"
            raise ConfigError(
                f"{name} has {entry!r}, which is not {what}. Separate entries with commas, "
                "as in ada@example.org,@example.org"
            )
    return entries


def load_team_settings(env: Mapping[str, str] | None = None, *, cwd: Path | None = None) -> TeamSettings:
    env = os.environ if env is None else env
    path = secrets_file(env, cwd)
    data = _read(path) if path is not None else {}
    auth = data.get("auth")
    sign_in = isinstance(auth, dict) and bool(auth)
    # The environment first, then the secrets file's top level (where Streamlit users keep them).
    values = {k: str(v) for k, v in data.items() if k.startswith("THOUGHTMAP_") and not isinstance(v, dict)}
    values.update({k: v for k, v in env.items() if k.startswith("THOUGHTMAP_")})
    admins = _emails(values, "THOUGHTMAP_ADMINS", anyone=False)
    allowed = _emails(values, "THOUGHTMAP_ALLOWED_EMAILS", anyone=True)
    if sign_in and not admins and not allowed:
        raise ConfigError(
            f"sign-in is on ({path} has [auth]) but nobody may sign in: set THOUGHTMAP_ADMINS "
            "to your email (and THOUGHTMAP_ALLOWED_EMAILS to who else may, or * for anyone)"
        )
    max_runs = (
        number(values, "THOUGHTMAP_USER_MAX_ACTIVE_RUNS", int, 0, minimum=1)
        if values.get("THOUGHTMAP_USER_MAX_ACTIVE_RUNS", "").strip()
        else None
    )
    max_cost = (
        number(values, "THOUGHTMAP_USER_MAX_COST", float, 0.0, minimum=0, above_minimum=True)
        if values.get("THOUGHTMAP_USER_MAX_COST", "").strip()
        else None
    )
    return TeamSettings(
        sign_in=sign_in, admins=admins, allowed=allowed, max_active_runs=max_runs, max_cost=max_cost, secrets_file=path
    )
