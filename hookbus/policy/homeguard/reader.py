"""Reading bash: one command's text into the commands it runs (``syntax``), as bash reads
it, within the bounds of one check (``Budget``).

Bash is read as bash reads it, into simple commands: bash's tokens (quotes and backslashes
removed as bash removes them, ``$'...'`` decoded, a ``#`` that begins a word starting a
comment), here-documents, ``$(...)``, backticks and process substitutions, which run too,
and compound commands. One pass of anchored regexes, linear in the text's length; what bash
could not read (unbalanced quotes or parentheses), or nesting deeper than MAX_DEPTH, or
more than MAX_WORDS words and operators, raises Unreadable.
"""

from __future__ import annotations

import re
from typing import Any

from hookbus.policy.homeguard.bounds import MAX_ARITHMETIC, MAX_DEPTH, MAX_OUTPUT, MAX_PIECES, MAX_WORDS
from hookbus.policy.homeguard.errors import Unreadable
from hookbus.policy.homeguard.syntax import Arith, Command, Group, Item, Lit, Loop, Op, Part, Redirect, Sub, Var, Word

_BLANKS = re.compile(r"(?:[ \t]|\\\n)+")
_PLAIN = re.compile(r"[^ \t\n;&|()<>'\"\\$`]+")
# The lookahead-and-backreference reads the run once, without backtracking into it.
_PLAIN_WORD = re.compile(r"(?=([^ \t\n;&|()<>'\"\\$`#{}]+))\1(?![^ \t\n;&|()<>])")
_BRACE_PLAIN = re.compile(r"[^}'\"\\$`]+")
_DOUBLE_PLAIN = re.compile(r'[^"\\$`]+')
_HEREDOC_PLAIN = re.compile(r"[^\\$`]+")
_ARITH_PLAIN = re.compile(r"[^()$`]+")
_OPERATOR = re.compile(r";;&|;;|;&|&&|\|\||\|&|[;&|()]")
_REDIRECTION = re.compile(r"(\d+|\{[A-Za-z_][A-Za-z0-9_]*\})?(&>>|&>|<<<|<<-|<<|<>|<&|>>|>\||>&|<|>)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ANSI_C = re.compile(r"'((?:[^'\\]|\\.)*)'", re.S)
_BACKTICK = re.compile(r"((?:[^`\\]|\\.)*)`", re.S)
_PARAMETER = re.compile(r"([#!]?)([A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?|[0-9]+|[@*#?$!-])")
_PARAMETER_OPERATOR = re.compile(r":[-=+?]|[-=+?]|##|#|%%|%|//|/#|/%|/|\^\^|\^|,,|,|:|@")
_RESERVED = frozenset({"if", "then", "elif", "else", "fi", "do", "done", "while", "until", "{", "}", "!", "time", "case", "for", "select", "function", "coproc", "esac"})
_COLON = Word((Lit(":", False),), ":")


class Budget:
    """What one check reads at most: words, pieces, nesting, characters lexed."""

    def __init__(self, size: int) -> None:
        self.words = 0
        self.pieces = 0
        self.depth = 0
        self.lexed = 0
        self.max_lexed = 4 * size + MAX_OUTPUT

    def word(self) -> None:
        self.words += 1
        if self.words > MAX_WORDS:
            raise Unreadable(f"it has more than {MAX_WORDS} words and operators: too many to check")

    def piece(self) -> None:
        self.pieces += 1
        if self.pieces > MAX_PIECES:
            raise Unreadable(f"it has more than {MAX_PIECES} quoted parts and expansions: too many to check")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Unreadable(f"it nests commands more than {MAX_DEPTH} deep")

    def leave(self) -> None:
        self.depth -= 1

    def lex(self, size: int) -> None:
        self.lexed += size
        if self.lexed > self.max_lexed:
            raise Unreadable("it runs more command text than the guard reads")


class Reader:
    """Bash's grammar, as far as the guard needs it: one pass over ``text``."""

    def __init__(self, text: str, budget: Budget) -> None:
        budget.lex(len(text))
        self.text = text
        self.i = 0
        self.budget = budget
        self.pushed: list[tuple[str, Any]] = []
        self.heredocs: list[tuple[Redirect, str, bool, bool]] = []
        self.test_mode = False

    def parse(self) -> list[Item]:
        items, _ = self.parse_list(frozenset())
        return items

    def parse_list(self, closers: frozenset[str]) -> tuple[list[Item], str]:
        items: list[Item] = []
        command: Command | None = None
        while True:
            kind, value = self._token(command is None or not command.words)
            if kind == "eof":
                if command is not None:
                    items.append(command)
                if closers:
                    raise Unreadable("a (, $(, { or case is never closed")
                return items, ""
            if kind == "op":
                if value in closers:
                    if command is not None:
                        items.append(command)
                    return items, value
                if value == "(":
                    if command is not None and len(command.words) == 1 and not command.redirects:
                        if self._token(False) != ("op", ")"):
                            raise Unreadable("a ( after a command's name")
                        command = None
                        items.append(Op("function"))
                        continue
                    if command is not None:
                        items.append(command)
                        command = None
                    items.append(Group(tuple(self._nested(")"))))
                    continue
                if value in (")", ";;", ";&", ";;&"):
                    raise Unreadable(f"a {value} that closes nothing")
                if command is not None:
                    items.append(command)
                    command = None
                items.append(Op(value))
                continue
            if kind == "redir":
                if command is None:
                    command = Command([], [])
                command.redirects.append(value)
                continue
            if kind == "arith":
                if command is not None:
                    items.append(command)
                    command = None
                items.append(Command([_COLON, Word((value,), "((...))")], []))
                continue
            word: Word = value
            if command is None or not command.words:
                reserved = word.keyword()
                if reserved is not None and reserved in closers:
                    if command is not None:
                        items.append(command)
                    return items, reserved
                if reserved is not None and reserved in _RESERVED:
                    if command is not None:
                        items.append(command)
                        command = None
                    self._reserved(reserved, items)
                    continue
            if command is None:
                command = Command([], [])
            command.words.append(word)
            keyword = word.keyword()
            if len(command.words) == 1 and keyword == "[[":
                self.test_mode = True
            elif self.test_mode and keyword == "]]":
                self.test_mode = False

    def _nested(self, closer: str) -> list[Item]:
        self.budget.enter()
        items, found = self.parse_list(frozenset({closer}))
        self.budget.leave()
        if found != closer:
            raise Unreadable(f"a {closer} is missing")
        return items

    def _reserved(self, word: str, items: list[Item]) -> None:
        if word == "case":
            self._case(items)
        elif word in ("for", "select"):
            self._for(items)
        elif word == "function":
            kind, _ = self._token(False)
            if kind != "word":
                raise Unreadable("a function with no name")
            following = self._token(False)
            if following == ("op", "("):
                if self._token(False) != ("op", ")"):
                    raise Unreadable("a function's ( is not closed")
            else:
                self.pushed.append(following)
            items.append(Op("function"))
        else:
            items.append(Op(word))

    def _case(self, items: list[Item]) -> None:
        kind, subject = self._token(False)
        if kind != "word":
            raise Unreadable("a case with no word")
        kind, value = self._skip_newlines()
        if kind != "word" or value.keyword() != "in":
            raise Unreadable("a case with no in")
        words: list[Word] = [_COLON, subject]
        bodies: list[Item] = []
        while True:
            kind, value = self._skip_newlines()
            if kind == "word" and value.keyword() == "esac":
                break
            if (kind, value) == ("op", "("):
                kind, value = self._token(False)
            while True:
                if kind != "word":
                    raise Unreadable("a case pattern bash cannot read")
                words.append(value)
                kind, value = self._token(False)
                if (kind, value) == ("op", "|"):
                    kind, value = self._token(False)
                    continue
                if (kind, value) == ("op", ")"):
                    break
                raise Unreadable("a case pattern with no )")
            body, closer = self.parse_list(frozenset({";;", ";&", ";;&", "esac"}))
            bodies.extend(body)
            bodies.append(Op(";"))
            if closer == "esac":
                break
        items.append(Command(words, []))
        items.append(Op(";"))
        items.extend(bodies)

    def _for(self, items: list[Item]) -> None:
        kind, value = self._token(True)
        if kind == "arith":
            items.append(Command([_COLON, Word((value,), "((...))")], []))
            return
        name = value.keyword() if kind == "word" else None
        if name is None:
            raise Unreadable("a for loop with no name")
        kind, value = self._skip_newlines()
        if kind == "word" and value.keyword() == "in":
            words: list[Word] = []
            while True:
                kind, value = self._token(False)
                if kind == "word":
                    words.append(value)
                    continue
                if kind == "op" and value in (";", "\n"):
                    break
                raise Unreadable("a for loop's words are not closed")
            items.append(Loop(name, tuple(words)))
            items.append(Op(";"))
            return
        self.pushed.append((kind, value))
        items.append(Loop(name, None))

    def _skip_newlines(self) -> tuple[str, Any]:
        while True:
            token = self._token(False)
            if token != ("op", "\n"):
                return token

    def _token(self, command_start: bool) -> tuple[str, Any]:
        if self.pushed:
            return self.pushed.pop()
        text = self.text
        while True:
            blanks = _BLANKS.match(text, self.i)
            if blanks is not None:
                self.i = blanks.end()
            if self.i >= len(text):
                return "eof", ""
            if text[self.i] != "#":
                break
            end = text.find("\n", self.i)  # a comment, to the end of the line
            self.i = len(text) if end < 0 else end
        char = text[self.i]
        self.budget.word()
        plain = _PLAIN_WORD.match(text, self.i)
        if plain is not None and not self.test_mode:
            # Most tokens: a word of ordinary characters, ended by a blank or an operator
            # (digits before < or > are a descriptor, left to the full reading).
            word = plain.group()
            if not (word.isdigit() and text.startswith(("<", ">"), plain.end())):
                self.i = plain.end()
                self.budget.piece()
                return "word", Word((Lit(word, False),), word)
        if char == "\n":
            self.i += 1
            self._read_heredocs()
            return "op", "\n"
        if self.test_mode and char in "<>()":
            self.i += 1
            return "word", Word((Lit(char, True),), char)
        if command_start and text.startswith("((", self.i):
            arith = self._arithmetic(self.i + 2)
            if arith is not None:
                return "arith", arith
        found = _REDIRECTION.match(text, self.i)
        if found is not None:
            descriptor, op = found.group(1) or "", found.group(2)
            substitution = op in ("<", ">") and text.startswith("(", found.end())
            if not substitution and not (descriptor and op.startswith("&")):
                self.i = found.end()
                return "redir", self._redirect(op, descriptor)
        operator = _OPERATOR.match(text, self.i)
        if operator is not None and not (char in "<>"):
            self.i = operator.end()
            return "op", operator.group()
        return "word", self._word()

    def _redirect(self, op: str, descriptor: str) -> Redirect:
        kind, target = self._token(False)
        if kind != "word":
            raise Unreadable(f"a {op} with no word after it")
        redirect = Redirect(op, descriptor, target)
        if op in ("<<", "<<-"):
            delimiter = "".join(part.text for part in target.parts if isinstance(part, Lit))
            quoted = any(isinstance(part, Lit) and part.quoted for part in target.parts)
            self.heredocs.append((redirect, delimiter, op == "<<-", quoted))
        return redirect

    def _read_heredocs(self) -> None:
        for redirect, delimiter, strip_tabs, quoted in self.heredocs:
            line = re.compile("^" + ("\t*" if strip_tabs else "") + re.escape(delimiter) + "$", re.M)
            found = line.search(self.text, self.i)
            end = found.start() if found is not None else len(self.text)
            body = self.text[self.i : end]
            self.i = min(found.end() + 1, len(self.text)) if found is not None else len(self.text)
            if quoted:
                redirect.body = Word((Lit(body, True),), body)
            else:
                redirect.body = Reader(body, self.budget).heredoc_word()
        self.heredocs.clear()

    def heredoc_word(self) -> Word:
        """The whole text as an unquoted here-document's body: expansions, no quotes."""
        parts: list[Part] = []
        text = self.text
        while self.i < len(text):
            char = text[self.i]
            if char == "\\":
                following = text[self.i + 1 : self.i + 2]
                if following == "\n":
                    self.i += 2
                elif following in ("$", "`", "\\"):
                    parts.append(Lit(following, True))
                    self.i += 2
                else:
                    parts.append(Lit("\\", True))
                    self.i += 1
            elif char == "$":
                parts.extend(self._dollar(True))
            elif char == "`":
                parts.append(self._backtick())
            else:
                plain = _HEREDOC_PLAIN.match(text, self.i)
                assert plain is not None
                parts.append(Lit(plain.group(), True))
                self.i = plain.end()
            self.budget.piece()
        return Word(tuple(parts), text)

    def _word(self) -> Word:
        start = self.i
        parts = self._parts(False)
        return Word(tuple(parts), self.text[start : self.i])

    def _parts(self, in_braces: bool) -> list[Part]:
        """A word's parts, up to a metacharacter (or, ``in_braces``, up to ``}``)."""
        parts: list[Part] = []
        text = self.text
        while self.i < len(text):
            char = text[self.i]
            if in_braces:
                if char == "}":
                    break
            elif char in " \t\n;&|()<>":
                if char in "<>" and text.startswith("(", self.i + 1):
                    self.i += 2
                    parts.append(Sub(tuple(self._nested(")")), char + "("))
                    continue
                break
            if char == "'":
                end = text.find("'", self.i + 1)
                if end < 0:
                    raise Unreadable("a ' is never closed")
                parts.append(Lit(text[self.i + 1 : end], True))
                self.i = end + 1
            elif char == '"':
                parts.extend(self._double_quoted())
            elif char == "\\":
                following = text[self.i + 1 : self.i + 2]
                if following == "\n":
                    self.i += 2
                    continue
                parts.append(Lit(following or "\\", True))
                self.i += 2
            elif char == "$":
                parts.extend(self._dollar(False))
            elif char == "`":
                parts.append(self._backtick())
            else:
                plain = (_BRACE_PLAIN if in_braces else _PLAIN).match(text, self.i)
                if plain is None:
                    parts.append(Lit(char, False))
                    self.i += 1
                else:
                    parts.append(Lit(plain.group(), False))
                    self.i = plain.end()
            self.budget.piece()
        return parts

    def _double_quoted(self) -> list[Part]:
        text = self.text
        self.i += 1
        parts: list[Part] = [Lit("", True)]  # "" is an empty word, not none
        while True:
            if self.i >= len(text):
                raise Unreadable('a " is never closed')
            char = text[self.i]
            if char == '"':
                self.i += 1
                return parts
            if char == "\\":
                following = text[self.i + 1 : self.i + 2]
                if following == "\n":
                    self.i += 2
                elif following in ("$", "`", '"', "\\"):
                    parts.append(Lit(following, True))
                    self.i += 2
                else:
                    parts.append(Lit("\\", True))
                    self.i += 1
            elif char == "$":
                parts.extend(self._dollar(True))
            elif char == "`":
                parts.append(self._backtick())
            else:
                plain = _DOUBLE_PLAIN.match(text, self.i)
                assert plain is not None
                parts.append(Lit(plain.group(), True))
                self.i = plain.end()
            self.budget.piece()

    def _dollar(self, quoted: bool) -> list[Part]:
        text, start = self.text, self.i
        following = text[start + 1 : start + 2]
        if following == "'" and not quoted:
            found = _ANSI_C.match(text, start + 1)
            if found is None:
                raise Unreadable("a $' is never closed")
            self.i = found.end()
            return [Lit(ansi_c(found.group(1)), True)]
        if following == '"' and not quoted:
            self.i += 1
            return self._double_quoted()
        if following == "(":
            if text.startswith("((", start + 1):
                arith = self._arithmetic(start + 3)
                if arith is not None:
                    return [arith]
            self.i = start + 2
            return [Sub(tuple(self._nested(")")), "$(")]
        if following == "{":
            return [self._parameter(start + 2)]
        name = _NAME.match(text, start + 1)
        if name is not None:
            self.i = name.end()
            return [Var(name.group())]
        if following and following in "0123456789@*#?$!-":
            self.i = start + 2
            return [Var(following)]
        self.i = start + 1
        return [Lit("$", quoted)]

    def _parameter(self, start: int) -> Var:
        found = _PARAMETER.match(self.text, start)
        if found is None:
            raise Unreadable("a ${...} bash cannot read")
        prefix, name = found.group(1), found.group(2)
        self.i = found.end()
        operator = _PARAMETER_OPERATOR.match(self.text, self.i)
        op = operator.group() if operator is not None else ""
        argument: Word | None = None
        if op:
            self.i = operator.end() if operator is not None else self.i
            at = self.i
            self.budget.enter()
            argument = Word(tuple(self._parts(True)), self.text[at : self.i])
            self.budget.leave()
        if not self.text.startswith("}", self.i):
            raise Unreadable("a ${ is never closed")
        self.i += 1
        if "[" in name:
            return Var(name, "[", argument, prefix)  # an array's element: not followed
        return Var(name, op, argument, prefix)

    def _arithmetic(self, start: int) -> Arith | None:
        """``$((`` or ``((`` that ``start`` follows, up to its ``))``; None when the
        parentheses do not close as arithmetic (it is then a subshell, as bash decides)."""
        text, saved, depth, position = self.text, self.i, 0, start
        subs: list[Sub] = []
        end = min(len(text), start + MAX_ARITHMETIC)
        while position < end:
            plain = _ARITH_PLAIN.match(text, position, end)
            if plain is not None:
                position = plain.end()
                continue
            char = text[position]
            if char == "(":
                depth += 1
            elif char == ")":
                if depth == 0:
                    if text.startswith("))", position):
                        self.i = position + 2
                        return Arith(tuple(subs))
                    break
                depth -= 1
            elif char == "$" and text.startswith("(", position + 1) and not text.startswith("((", position + 1):
                self.i = position + 2
                subs.append(Sub(tuple(self._nested(")")), "$("))
                position = self.i
                continue
            elif char == "`":
                self.i = position
                subs.append(self._backtick())
                position = self.i
                continue
            position += 1
        self.i = saved
        return None

    def _backtick(self) -> Sub:
        found = _BACKTICK.match(self.text, self.i + 1)
        if found is None:
            raise Unreadable("a ` is never closed")
        self.i = found.end()
        inner = re.sub(r"\\([$`\\])", r"\1", found.group(1))
        self.budget.enter()
        items = Reader(inner, self.budget).parse()
        self.budget.leave()
        return Sub(tuple(items), "`")


_ANSI_ESCAPE = re.compile(r"\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})|c(.)|(.))", re.S)
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def ansi_c(text: str) -> str:
    """``$'...'``'s escapes decoded as bash decodes them (a NUL ends the string)."""

    def decoded(found: re.Match[str]) -> str:
        hexa, short, long, octal, control, other = found.groups()
        try:
            if hexa or short or long:
                return chr(int(hexa or short or long, 16))
            if octal:
                return chr(int(octal, 8) & 0xFF)
        except (ValueError, OverflowError):
            return "?"
        if control:
            return chr(ord(control) & 0x1F)
        return _SIMPLE_ESCAPES.get(other, other if other in "\\'\"?" else "\\" + other)

    return _ANSI_ESCAPE.sub(decoded, text).split("\0", 1)[0]
