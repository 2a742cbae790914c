"""The floor job's answer for a kit: each known distribution's verdict, as text and as
versioned JSON (`ninfer-kits floor`)."""

from __future__ import annotations

from collections.abc import Sequence

from ninfer_kits.inspector.floor import kit_floor
from ninfer_kits.platforms.distro_verdict import Verdict, floor_summary, judge_all
from ninfer_kits.platforms.distros import DistroFacts
from ninfer_kits.verify.kit import KitOnDisk

JSON_SCHEMA_VERSION = 1


def floor_verdicts(kit: KitOnDisk,
                   known: DistroFacts) -> tuple[tuple[Verdict, ...], tuple[str, ...]]:
    floor = kit_floor(kit.files)
    cuda_version = kit.info.cuda_version if kit.info is not None else None
    return judge_all(floor, known, cuda_version=cuda_version), floor_summary(floor)


def render(kit: KitOnDisk, known: DistroFacts, needs: Sequence[str],
           verdicts: Sequence[Verdict]) -> str:
    lines = [f"Kit    {kit.shown} ({kit.checked})",
             f"Needs  {'; '.join(needs)}",
             f"Facts  {known.path} (as of {known.as_of}; [unchecked]: a fact the file does not "
             f"mark as confirmed)", ""]
    for verdict in verdicts:
        lines.append(verdict.line())
        for runtime in verdict.cuda:
            image = runtime.image + (" [unchecked]" if runtime.image_unchecked else "")
            if runtime.how in ("distribution", "nvidia"):
                text = runtime.text + (" [unchecked]" if runtime.unchecked else "")
                lines.append(f"  CUDA runtime: {text}" + (f"; image {image}" if image else ""))
            elif runtime.image:
                lines.append(f"  CUDA runtime: in the image {image}")
        lines += [f"  note: {note}" for note in verdict.notes]
    counts = {answer: sum(v.answer == answer for v in verdicts)
              for answer in ("yes", "no", "not known")}
    lines += ["", "; ".join(f"{answer}: {count}" for answer, count in counts.items()) + "."]
    return "\n".join(lines) + "\n"


def to_json(kit: KitOnDisk, known: DistroFacts, needs: Sequence[str],
            verdicts: Sequence[Verdict]) -> dict[str, object]:
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "kit": kit.shown,
        "checked": kit.checked,
        "needs": list(needs),
        "facts": {"file": str(known.path), "as_of": known.as_of.isoformat(),
                  "arch": known.arch},
        "distributions": [{
            "id": v.distro.id,
            "name": v.distro.name,
            "answer": v.answer,
            "summary": v.line(),
            "unchecked": list(v.unchecked),
            "requirements": [{"requirement": r.requirement, "status": r.status, "text": r.text,
                              "unchecked": list(r.unchecked)} for r in v.reasons],
            "cuda_runtime": [{"soname": c.soname, "how": c.how, "package": c.package,
                              "image": c.image, "text": c.text, "unchecked": list(c.unchecked),
                              "image_unchecked": list(c.image_unchecked)} for c in v.cuda],
            "notes": list(v.notes),
        } for v in verdicts],
    }
