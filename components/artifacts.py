"""Method artifacts beside the map: OmniThink's conceptual pool (growing per step) and outline."""

from __future__ import annotations

import streamlit as st

from components.safe_markdown import render
from engine.services import Services
from storage.models import Run


def concept_pool(services: Services, run: Run) -> None:
    versions = [r for r in services.repo.list_reports(run.id) if r.kind == "concept_pool"]
    if not versions:
        return
    latest = versions[-1].data
    st.markdown(f"**Conceptual pool** · step {latest.get('step', 0)} · {len(latest.get('concepts', []))} concepts"
                + (" · judged sufficient" if latest.get("sufficient") else ""))
    added = set(latest.get("added", []))
    lines = [f"- {'**new** · ' if c in added else ''}{c}" for c in latest.get("concepts", [])]
    render(st, "\n".join(lines) or "_empty_")
    if len(versions) > 1:
        with st.expander("How the pool grew"):
            for version in versions:
                data = version.data
                st.caption(f"Step {data.get('step')}: +{len(data.get('added', []))} new, "
                           f"{len(data.get('duplicates', []))} duplicates merged")


def outline(services: Services, run: Run) -> None:
    report = services.repo.latest_report(run.id, "outline")
    if report is None:
        return
    lines = []
    for section in report.data.get("outline", {}).get("sections", []):
        lines.append(f"1. {section['title']}")
        lines.extend(f"    - {sub}" for sub in section.get("subsections", []))
    with st.expander("Outline", expanded=False):
        render(st, "\n".join(lines) or "_empty_")


def stale_article_notice(services: Services, run: Run) -> None:
    """OmniThink rewrites its article only on request: say when the tree changed since."""
    article = services.repo.latest_report(run.id, "final")
    if article is None or "tree" not in article.data:
        return
    current = [[n.id, n.status] for n in services.repo.list_nodes(run.id) if n.kind in ("topic", "subtopic")]
    if current == article.data["tree"]:
        return
    cols = st.columns([4, 1])
    cols[0].info("The information tree changed since the article was written.", icon=":material/update:")
    if cols[1].button("Regenerate article", key=f"regen-article-{run.id}"):
        services.runner.steer(run.id, "regenerate_article")
        st.session_state["flash"] = "Rewriting the article"
        st.rerun(scope="app")
