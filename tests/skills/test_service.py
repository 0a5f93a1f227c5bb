from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import Conflict, Invalid
from app.skills.models import Skill
from app.skills.schemas import SkillCreate
from app.skills.service import parse_skill_md, skill_service


def test_parse_skill_md_tolerates_bom_crlf_and_no_body() -> None:
    doc = "\ufeff---\r\nname: deploy\r\ndescription: Ship it\r\n---\r\nStep 1\r\nStep 2\r\n"
    parsed = parse_skill_md(doc)
    assert (parsed.name, parsed.description) == ("deploy", "Ship it")
    assert parsed.content == "Step 1\r\nStep 2"


def test_parse_skill_md_keeps_extra_front_matter_out_of_the_body() -> None:
    doc = "---\nname: triage\ndescription: >\n  Folded\n  text\nlicense: MIT\n---\n\nBody ---\n"
    parsed = parse_skill_md(doc)
    assert parsed.description == "Folded text"
    assert parsed.content == "Body ---"


@pytest.mark.parametrize(
    "doc",
    [
        "",
        "name: x\ndescription: y",
        "--- \nname: x\ndescription: y\n",
        "---\nname: x\ndescription: ''\n---\n",
        "---\nname: x\ndescription: [a]\n---\n",
        "---\nname: a b\ndescription: d\n---\n",
        "---\nname: x\ndescription: " + "d" * 2001 + "\n---\n",
        "---\nname: empty\ndescription: d\n---",
        "---\nname: blank\ndescription: d\n---\n  \n\t\n",
    ],
)
def test_parse_skill_md_rejects(doc: str) -> None:
    with pytest.raises(Invalid) as info:
        parse_skill_md(doc)
    assert info.value.message.startswith("document: ")


async def test_a_unique_name_race_is_a_conflict_not_a_500(session: AsyncSession) -> None:
    """Two writers pass the name check at once: the constraint decides, as a 409."""
    await skill_service.create(session, SkillCreate(name="raced", content="c"))
    with pytest.raises(Conflict):
        await skill_service.save(session, Skill(name="raced", content="c"))
    count = await session.scalar(select(func.count()).select_from(Skill))
    assert count == 1, "the failed insert was rolled back to its savepoint; the session lives on"
