"""Offline text helpers for fake answers: rough token counts and prompt-derived phrases."""

from __future__ import annotations

import math
import random
import re

# Hiragana/katakana, CJK ideographs (incl. extension A and compatibility) and Hangul syllables.
_CJK_CLASS = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_CHAR = re.compile(f"[{_CJK_CLASS}]")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_STOPWORDS = frozenset(
    """about above after again against also been before being below between both could does doing
    down during each from further have having here into just more most much must only other over
    own same should some such than that their theirs them then there these they this those through
    under until very what when where which while will with would your yours please answer reply
    return json following given text user assistant""".split()
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


def count_tokens(text: str) -> int:
    """About one token per CJK character and per four other characters."""
    cjk = len(_CJK_CHAR.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


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


class Topic:
    """Keywords of a prompt, to phrase short answers that visibly relate to it."""

    def __init__(self, text: str) -> None:
        keywords: list[str] = []
        for match in re.finditer(f"{_LATIN_WORD.pattern}|{_CJK_RUN.pattern}", text):
            word = match.group(0)
            chunks = [word[i : i + 2] for i in range(0, len(word), 2)] if _CJK_CHAR.match(word) else [word.lower()]
            for chunk in chunks:
                if chunk not in _STOPWORDS and chunk not in keywords:
                    keywords.append(chunk)
            if len(keywords) >= _MAX_KEYWORDS:
                break
        self.chinese = len(_CJK_CHAR.findall(text)) * 2 > len(text.strip())
        self.keywords = keywords[:_MAX_KEYWORDS] or (["该请求"] if self.chinese else ["the request"])

    def word(self, rng: random.Random) -> str:
        return rng.choice(self.keywords)

    def sentence(self, rng: random.Random) -> str:
        templates = _ZH_TEMPLATES if self.chinese else _EN_TEMPLATES
        count = rng.randint(1, min(3, len(self.keywords)))
        return rng.choice(templates[count]).format(*rng.sample(self.keywords, k=count))

    def paragraph(self, rng: random.Random) -> str:
        fillers = _ZH_FILLERS if self.chinese else _EN_FILLERS
        sentences = [self.sentence(rng), *rng.sample(fillers, k=rng.randint(0, 2))]
        return ("" if self.chinese else " ").join(sentences)
