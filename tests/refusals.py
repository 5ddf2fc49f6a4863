"""What a command says when it refuses its input: the tests of hostile input ask each
refusal for the same form."""

from __future__ import annotations

from roofline.cli import main


def refused(argv: list[str], capsys) -> str:
    """The one paragraph a command refuses ``argv`` with (exit 2, no traceback)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("roofline: error: ") and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    return err
