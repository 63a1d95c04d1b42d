"""The lines a station prints at start: what it runs (camera, model, profile, links)."""

from __future__ import annotations

from typing import Any


def banner_lines(station: Any) -> list[str]:
    """What ``station`` (a started :class:`~inspector.station.loop.Station`) runs, a line each."""
    c, m = station.cfg, station.meta
    providers = getattr(station.policy, "providers", None)
    backend = station.policy.backend + (f" [{', '.join(providers)}]" if providers else "")
    params = ", ".join(f"{k}={v}" for k, v in (c.camera.params or {}).items())
    ro = getattr(station, "rollout", None)
    follows = f" -> {ro.label} ({ro.channel}) in {c.model.registry}" if ro is not None else ""
    lines = [
        f"inspector station {c.station_id}",
        f"  camera   {c.camera.driver}({params})",
        f"  model    {c.model.path}{follows} sha256 {station.model_sha256} backend {backend}",
        f"  profile  {station.profile_name or '-'} sha256 {station.profile_sha256 or '-'} "
        f"classes {','.join(m.classes)} budget {station.budget}",
        "  verdict  "
        + (f"ok bias {m.ok_bias:+.2f} (calibrated)" if m.ok_bias else "as trained (ok bias 0)")
        + (f", ensemble of {len(m.ensemble)} models" if m.ensemble else "")
        + (f", search to zoom level {m.max_zoom} at most" if m.max_zoom is not None else ""),
        f"  trigger  {c.trigger.mode}",
    ]
    if station.opcua is not None:
        o = c.opcua
        who = f"users {','.join(u.name for u in o.users)}" if o.users else "anonymous"
        sec = "Sign&Encrypt" + (" only" if o.secure_only else "") if o.certificate else "none"
        lines.append(f"  opcua    {o.endpoint} {who} security {sec} buffer {o.buffer}")
    if station.shadow is not None:
        lines.append(f"  shadow   {c.shadow.model} sha256 {station.shadow.model_sha256} "
                     f"budget {c.shadow.budget_ms:g} ms")  # fmt: skip
    if station.publisher is not None:
        mc = station.publisher.config
        auth = f" user {mc.username}" if mc.username else ""
        tls = " TLS" if mc.tls else ""
        lines.append(
            f"  broker   {mc.host}:{mc.broker_port}{tls}{auth} prefix {station.publisher.prefix}"
        )
    else:
        lines.append("  broker   off (results stay in the outbox)")
    outbox = getattr(station.reporter, "outbox", None)
    if outbox is not None:
        lines.append(f"  outbox   {outbox.path} depth {outbox.depth()} limit {outbox.limit}")
    f = c.footage
    lines.append(
        f"  footage  {f.path} (defects, confidence < {f.keep.low_confidence_below:g}, "
        f"1 in {f.keep.ok_one_in} ok; {f.max_size_mb:g} MB)"
        if f.path
        else "  footage  off"
    )
    return lines
