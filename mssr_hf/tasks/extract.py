"""Answer extractors: generated text -> the answer that is scored (a ``TaskSpec``'s ``extract_answer``).

The Hub tasks (``builtin.py``), the offline tasks (``offline.py``) and the synthetic ones (``synthetic.py``) share
them. A model that does not stop after its answer goes on with the next example; each extractor keeps only its own
answer (:func:`own_answer`) before reading it: a first line, a yes/no, the number after ``####``, the last
``\\boxed{...}``, ...
"""

from __future__ import annotations

import re

__all__ = ["boxed", "final_answer", "first_line", "gsm8k_answer", "last_number", "own_answer", "response", "yes_no"]

# A model that does not stop after its answer starts the next example; only the text before that is its answer.
_NEXT_EXAMPLE = re.compile(r"\n\s*(?:Question|Problem|Instruction|Context|Passage|Article|Subject|Q):")
_NUMBER = re.compile(r"-?\$?\d+(?:,\d{3})*(?:\.\d+)?")
_ANSWER_IS = re.compile(r"answer is:?\s*(.+?)\.?(?=\s*(?:\n|$)|\.\s)", re.IGNORECASE)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def own_answer(text: str) -> str:
    """``text`` up to the start of a next example (a line opening with ``Question:``, ``Problem:``...)."""
    return _NEXT_EXAMPLE.split(text, maxsplit=1)[0]


def response(text: str) -> str:
    """An instruction's response: ``text`` up to a next ``Instruction:`` line, stripped."""
    return re.split(r"\n\s*Instruction:", text, maxsplit=1)[0].strip()


def first_line(text: str) -> str:
    """The first non-empty line of the answer, stripped: for short answers (a label, a span, a letter)."""
    lines = [line.strip() for line in own_answer(text).strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def yes_no(text: str) -> str:
    """``"yes"`` or ``"no"`` read from the first word of the answer (``True``/``False`` count too), else the first
    line."""
    line = first_line(text)
    word = line.split()[0].strip(".,;:!?\"'()").lower() if line else ""
    return {"yes": "yes", "true": "yes", "no": "no", "false": "no"}.get(word, line)


def last_number(text: str) -> str | None:
    """The last number in ``text`` (``1,000``, ``-3.5``; a leading ``$`` dropped), or None."""
    numbers = _NUMBER.findall(text)
    return numbers[-1].replace("$", "") if numbers else None


def boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text`` whose braces close (nested braces
    included, escaped ``\\{`` not counted), else of a brace-less ``\\boxed 5``; None if there is neither."""
    for match in reversed(list(_BOXED.finditer(text))):
        depth, j = 0, match.end() - 1
        while j < len(text):
            if text[j] == "\\":  # an escaped character (``\\{``, ``\\}``) opens or closes nothing
                j += 2
                continue
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                return text[match.end() : j].strip()
            j += 1
    bare = re.findall(r"\\boxed ([^\s$]+)", text)
    return bare[-1] if bare else None


def gsm8k_answer(text: str) -> str:
    """The answer of a GSM8K-style solution: the number after the last ``####``, else the number (or text) after the
    last "the answer is", else the last number, else the text."""
    text = own_answer(text)
    if "####" in text:
        after = text.rsplit("####", 1)[1].strip()
        number = _NUMBER.match(after)
        return number.group().replace("$", "") if number else first_line(after)
    said = _ANSWER_IS.findall(text)
    if said:
        number = _NUMBER.search(said[-1])
        return number.group().replace("$", "") if number else said[-1].strip()
    return last_number(text) or text.strip()


def final_answer(text: str) -> str:
    """The final answer of a reasoning-formatted solution: the last ``\\boxed{...}``, else what follows the last "the
    answer is", else the number after the last ``####``; without any of these, a one-line text is the answer itself
    (``2^(n-1)``, ``\\frac{1}{2}``) and a longer one's answer is its last number."""
    text = own_answer(text).strip()
    answer = boxed(text)
    if answer is not None:
        return answer
    said = _ANSWER_IS.findall(text)
    if said:
        return said[-1].strip()
    if "####" not in text and "\n" not in text:
        return text
    return gsm8k_answer(text)
