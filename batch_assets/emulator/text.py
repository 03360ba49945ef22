"""Offline text helpers for fake answers: rough token counts and prompt-derived phrases."""

from __future__ import annotations

import math
import random
import re
from typing import Any

# Hiragana/katakana, CJK ideographs (incl. extension A and compatibility) and Hangul syllables.
_CJK_CLASS = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_CHAR = re.compile(f"[{_CJK_CLASS}]")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_WORD_OR_RUN = re.compile(f"{_LATIN_WORD.pattern}|{_CJK_RUN.pattern}")
_STOPWORDS = frozenset(
    """about above after again against also been before being below between both could does doing
    down during each from further have having here into just more most much must only other over
    own same should some such than that their theirs them then there these they this those through
    under until very what when where which while will with would your yours please answer reply
    return json following given text user assistant summarize summarise summary sentence sentences
    ticket language subject body product stars title review""".split()
)
_MAX_KEYWORDS = 8

# Sentence templates by how many prompt keywords they name.
_EN_TEMPLATES = {
    1: ("The main point concerns {}.", "This is chiefly about {}."),
    2: ("The text is mainly about {} and {}.", "This is chiefly a matter of {} and {}."),
    3: ("It mentions {}, {} and {}.",),
}
_ZH_TEMPLATES = {
    1: ("重点在于{}。",),
    2: ("内容主要涉及{}和{}。",),
    3: ("文本提到了{}、{}和{}。",),
}
_EN_FILLERS = (
    "The details given are consistent with each other.",
    "No further information is needed to decide.",
    "Nothing in the text points the other way.",
    "The tone of the message is clear.",
)
_ZH_FILLERS = ("文中信息前后一致。", "无需更多信息即可判断。", "语气比较明确。")
# Follow-up sentences of a summary asked for in so many sentences.
_EN_MORE = {1: "It also touches on {}.", 2: "It also mentions {} and {}.", 3: "It also mentions {}, {} and {}."}
_ZH_MORE = {1: "另外还提到{}。", 2: "另外还提到{}和{}。", 3: "另外还提到{}、{}和{}。"}
_NUMBERS = {"one": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_SENTENCE_COUNT = re.compile(r"\b(one|single|two|three|four|five|[1-5])[ -]sentences?\b", re.IGNORECASE)
_ZH_SENTENCE_COUNT = re.compile(r"([一两二三四五1-5])句话")
_ZH_NUMBERS = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5}


def count_tokens(text: str) -> int:
    """About one token per CJK character and per four other characters."""
    cjk = _cjk_count(text)
    return cjk + math.ceil((len(text) - cjk) / 4)


def _cjk_count(text: str) -> int:
    # ASCII text (most prompts) has none; `isascii` is far cheaper than the regex scan.
    return 0 if text.isascii() else len(_CJK_CHAR.findall(text))


def cut_to_tokens(text: str, budget: int) -> str:
    """The longest prefix of `text` that `count_tokens` prices at no more than `budget`."""
    if count_tokens(text) <= budget:
        return text
    cost = 0.0
    for index, char in enumerate(text):
        cost += 1.0 if _CJK_CHAR.match(char) else 0.25
        if math.ceil(cost) > budget:
            return text[:index]
    return text


def text_of(content: Any) -> str:
    """The text of a message `content` (or `system`) value: a string, or a list of parts of which those
    with a string `text` count, joined by newlines; anything else is empty."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def requested_sentences(text: str) -> int | None:
    """How many sentences a prompt asks for ("summarize in two sentences", "用两句话"), if it says."""
    # The substring tests skip the (much slower) searches for the prompts that cannot match.
    match = _SENTENCE_COUNT.search(text) if "sentence" in text.casefold() else None
    if match:
        word = match.group(1).lower()
        return int(word) if word.isdigit() else _NUMBERS[word]
    match = _ZH_SENTENCE_COUNT.search(text) if "句话" in text else None
    if match:
        word = match.group(1)
        return int(word) if word.isdigit() else _ZH_NUMBERS[word]
    return None


class Topic:
    """Keywords of a prompt, to phrase short answers that visibly relate to it."""

    def __init__(self, text: str) -> None:
        keywords: list[str] = []
        # Prompts put instructions first and the data last: take keywords from the last block
        # (after the last blank line) first, so answers echo the content, not the instructions.
        focus = text.strip().rsplit("\n\n", 1)[-1]
        self.focus = focus.lower()
        for source in (focus, text):
            for match in _WORD_OR_RUN.finditer(source):
                word = match.group(0)
                chunks = [word[i : i + 2] for i in range(0, len(word), 2)] if _CJK_CHAR.match(word) else [word.lower()]
                for chunk in chunks:
                    if chunk not in _STOPWORDS and chunk not in keywords:
                        keywords.append(chunk)
                if len(keywords) >= _MAX_KEYWORDS:
                    break
            if len(keywords) >= _MAX_KEYWORDS:
                break
        self.chinese = _cjk_count(text) * 2 > len(text.strip())
        self.keywords = keywords[:_MAX_KEYWORDS] or (["该请求"] if self.chinese else ["the request"])

    def word(self, rng: random.Random) -> str:
        return rng.choice(self.keywords)

    def sentence(self, rng: random.Random) -> str:
        templates = _ZH_TEMPLATES if self.chinese else _EN_TEMPLATES
        count = rng.randint(1, min(3, len(self.keywords)))
        return rng.choice(templates[count]).format(*rng.sample(self.keywords, k=count))

    def paragraph(self, rng: random.Random, sentences: int | None = None) -> str:
        """A few sentences about the prompt; with `sentences`, exactly that many, sharing out its keywords."""
        fillers = _ZH_FILLERS if self.chinese else _EN_FILLERS
        if sentences is None:
            chosen = [self.sentence(rng), *rng.sample(fillers, k=rng.randint(0, 2))]
        else:
            words = self.keywords[: 3 * sentences]
            per = math.ceil(len(words) / sentences)
            chunks = [words[i : i + per] for i in range(0, len(words), per)]
            templates = _ZH_TEMPLATES if self.chinese else _EN_TEMPLATES
            more = _ZH_MORE if self.chinese else _EN_MORE
            chosen = [rng.choice(templates[len(chunks[0])]).format(*chunks[0])]
            chosen += [more[len(chunk)].format(*chunk) for chunk in chunks[1:]]
            # Fewer keywords than sentences asked for: pad with neutral ones.
            missing = sentences - len(chosen)
            chosen += rng.sample(fillers, k=min(len(fillers), missing))
            chosen += [fillers[0]] * (sentences - len(chosen))
        return ("" if self.chinese else " ").join(chosen)
