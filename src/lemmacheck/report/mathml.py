"""LaTeX -> MathML for claim statements, and a sanitiser for every MathML fragment the report embeds.

Claim statements are LaTeX strings written by people. The report renders them offline, so this module
converts the subset that claim files use (norms, relations, fractions, scripts, roots, Greek, operator names,
\\text, big operators, accents, font switches, delimiters, simple environments) into presentation MathML.
Anything outside that subset raises `LatexError`; callers then show the escaped source in a <code> block, never
raw HTML. Every fragment (ours and sympy's) is re-parsed and re-serialised through `sanitize`, which keeps
only whitelisted MathML elements and attributes, so no markup from a claim file can reach the page.

Long statements are split at top-level break points (after commas, relations, around text) into several inline
<math> elements, because MathML has no automatic line breaking in browsers.

Why not latex2mathml: version 3.81.1 also converts every claim statement, but each into
one unbreakable <math>, and every statement here is split into several for wrapping; so this stays.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass


class LatexError(ValueError):
    """The LaTeX uses something this converter does not cover (the caller falls back to the source)."""


# --------------------------------------------------------------------------------------------- tables

GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ϵ", "varepsilon": "ε", "zeta": "ζ",
    "eta": "η", "theta": "θ", "vartheta": "ϑ", "iota": "ι", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν",
    "xi": "ξ", "pi": "π", "varpi": "ϖ", "rho": "ρ", "varrho": "ϱ", "sigma": "σ", "varsigma": "ς", "tau": "τ",
    "upsilon": "υ", "phi": "ϕ", "varphi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω",
}
GREEK_UPPER = {
    "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Xi": "Ξ", "Pi": "Π", "Sigma": "Σ",
    "Upsilon": "Υ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
}
# Letter-like symbols rendered as identifiers.
IDENTS = {"ell": "ℓ", "hbar": "ℏ", "infty": "∞", "emptyset": "∅", "varnothing": "∅", "partial": "∂",
          "nabla": "∇", "aleph": "ℵ", "Re": "ℜ", "Im": "ℑ", "imath": "ı", "jmath": "ȷ", "wp": "℘"}
OPERATORS = {
    "le": "≤", "leq": "≤", "leqslant": "⩽", "ge": "≥", "geq": "≥", "geqslant": "⩾", "ne": "≠", "neq": "≠",
    "lt": "<", "gt": ">", "approx": "≈", "sim": "∼", "simeq": "≃", "cong": "≅", "equiv": "≡", "propto": "∝",
    "ll": "≪", "gg": "≫", "lesssim": "≲", "gtrsim": "≳", "prec": "≺", "succ": "≻", "preceq": "⪯",
    "succeq": "⪰", "in": "∈", "notin": "∉", "ni": "∋", "subset": "⊂", "subseteq": "⊆", "supset": "⊃",
    "supseteq": "⊇", "cup": "∪", "cap": "∩", "setminus": "∖", "times": "×", "cdot": "⋅", "cdots": "⋯",
    "ldots": "…", "dots": "…", "vdots": "⋮", "ddots": "⋱", "pm": "±", "mp": "∓", "div": "÷", "circ": "∘",
    "ast": "∗", "star": "⋆", "otimes": "⊗", "oplus": "⊕", "odot": "⊙", "to": "→", "rightarrow": "→",
    "leftarrow": "←", "Rightarrow": "⇒", "Leftarrow": "⇐", "Leftrightarrow": "⇔", "iff": "⟺",
    "implies": "⟹", "mapsto": "↦", "forall": "∀", "exists": "∃", "nexists": "∄", "neg": "¬", "lnot": "¬",
    "land": "∧", "lor": "∨", "wedge": "∧", "vee": "∨", "mid": "∣", "parallel": "∥", "perp": "⊥",
    "top": "⊤", "bot": "⊥", "prime": "′", "colon": ":", "vert": "|", "Vert": "‖", "lvert": "|",
    "rvert": "|", "lVert": "‖", "rVert": "‖", "langle": "⟨", "rangle": "⟩", "lfloor": "⌊", "rfloor": "⌋",
    "lceil": "⌈", "rceil": "⌉", "lbrace": "{", "rbrace": "}", "coloneqq": "≔", "triangleq": "≜",
    "dagger": "†", "sqcup": "⊔", "uplus": "⊎", "bullet": "∙", "triangle": "△", "angle": "∠",
    "uparrow": "↑", "downarrow": "↓", "longrightarrow": "⟶", "hookrightarrow": "↪", "sharp": "♯",
    "flat": "♭", "lhd": "⊲", "rhd": "⊳", "models": "⊨", "vdash": "⊢",
}
FUNCTIONS = {"log", "ln", "lg", "exp", "sin", "cos", "tan", "sinh", "cosh", "tanh", "arcsin", "arccos",
             "arctan", "det", "dim", "ker", "deg", "arg", "sgn", "tr", "Tr", "rank", "diag", "erf", "poly",
             "sec", "csc", "cot", "hom", "gcd", "Var", "Cov", "vol", "supp", "span", "sign"}
LIMIT_OPS = {"max": "max", "min": "min", "sup": "sup", "inf": "inf", "lim": "lim", "liminf": "lim inf",
             "limsup": "lim sup", "Pr": "Pr", "argmax": "arg max", "argmin": "arg min", "det": "det"}
BIG_OPS = {"sum": "∑", "prod": "∏", "coprod": "∐", "int": "∫", "iint": "∬", "oint": "∮", "bigcup": "⋃",
           "bigcap": "⋂", "bigoplus": "⨁", "bigotimes": "⨂", "bigvee": "⋁", "bigwedge": "⋀",
           "bigsqcup": "⨆"}
ACCENTS = {"tilde": "˜", "widetilde": "˜", "bar": "¯", "overline": "‾", "hat": "ˆ", "widehat": "ˆ",
           "vec": "→", "dot": "˙", "ddot": "¨", "check": "ˇ", "breve": "˘", "acute": "´", "grave": "`",
           "overrightarrow": "→", "mathring": "˚"}
UNDER = {"underline": "_", "underbar": "_", "utilde": "˜"}
SPACES = {",": "0.1667em", ":": "0.2222em", ">": "0.2222em", ";": "0.2778em", " ": "0.25em",
          "quad": "1em", "qquad": "2em", "enspace": "0.5em", "thinspace": "0.1667em", "medspace": "0.2222em",
          "thickspace": "0.2778em"}
IGNORED = {"displaystyle", "textstyle", "scriptstyle", "limits", "nolimits", "left.", "nonumber", "notag",
           "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr", "Biggl", "Biggr",
           "bigm", "Bigm", "!", "negthinspace", "allowbreak", "middle"}
TEXT_CMDS = {"text", "textrm", "textnormal", "mbox", "textup", "textbf", "textit", "textsf", "texttt", "hbox"}
FONT_CMDS = {"mathbf", "boldsymbol", "bm", "mathrm", "mathit", "mathsf", "mathtt", "mathcal", "mathscr",
             "mathbb", "mathds", "mathbbm", "mathfrak", "operatorname", "mathop", "mathnormal"}
DELIMS = {"(", ")", "[", "]", "|", "/", "<", ">", "."}
SYMBOL_CMDS = {"|": "‖", "{": "{", "}": "}", "_": "_", "%": "%", "&": "&", "#": "#", "$": "$"}
ENVIRONMENTS = {"matrix": ("", ""), "pmatrix": ("(", ")"), "bmatrix": ("[", "]"), "Bmatrix": ("{", "}"),
                "vmatrix": ("|", "|"), "Vmatrix": ("‖", "‖"), "cases": ("{", ""), "aligned": ("", ""),
                "align": ("", ""), "align*": ("", ""), "array": ("", ""), "gathered": ("", ""),
                "split": ("", ""), "smallmatrix": ("", "")}
# Top-level operators after which a long statement may wrap onto the next line.
BREAK_AFTER = {",", ";", "≤", "≥", "=", "<", ">", "≠", "≈", "∈", "⇒", "⟹", "⟺", "→", "⩽", "⩾", "≲", "≳"}

_DOUBLE_STRUCK = {"C": "ℂ", "H": "ℍ", "N": "ℕ", "P": "ℙ", "Q": "ℚ", "R": "ℝ", "Z": "ℤ", "1": "𝟙"}
_SCRIPT = {"B": "ℬ", "E": "ℰ", "F": "ℱ", "H": "ℋ", "I": "ℐ", "L": "ℒ", "M": "ℳ", "R": "ℛ", "e": "ℯ",
           "g": "ℊ", "o": "ℴ"}
_FRAKTUR = {"C": "ℭ", "H": "ℌ", "I": "ℑ", "R": "ℜ", "Z": "ℨ"}


def _alphabet(ch: str, base_upper: int, base_lower: int | None, special: dict[str, str]) -> str:
    if ch in special:
        return special[ch]
    if "A" <= ch <= "Z":
        return chr(base_upper + ord(ch) - ord("A"))
    if base_lower is not None and "a" <= ch <= "z":
        return chr(base_lower + ord(ch) - ord("a"))
    return ch


def _e(s: str) -> str:
    return html.escape(s, quote=True)


# --------------------------------------------------------------------------------------------- tokens

@dataclass
class Tok:
    kind: str  # "cmd", "num", "char", "open", "close", "sup", "sub", "amp", "space"
    text: str


_TOKEN = re.compile(r"\\([A-Za-z]+\*?|.)|(\d+(?:\.\d+)?)|(\s+)|(.)", re.DOTALL)


def tokenize(src: str) -> list[Tok]:
    out: list[Tok] = []
    for m in _TOKEN.finditer(src):
        cmd, num, ws, ch = m.groups()
        if cmd is not None:
            out.append(Tok("cmd", cmd))
        elif num is not None:
            out.append(Tok("num", num))
        elif ws is not None:
            out.append(Tok("space", ws))
        elif ch == "{":
            out.append(Tok("open", ch))
        elif ch == "}":
            out.append(Tok("close", ch))
        elif ch == "^":
            out.append(Tok("sup", ch))
        elif ch == "_":
            out.append(Tok("sub", ch))
        elif ch == "&":
            out.append(Tok("amp", ch))
        else:
            out.append(Tok("char", ch))
    if src.endswith("\\"):
        raise LatexError("trailing backslash")
    return out


# --------------------------------------------------------------------------------------------- parser

def _mrow(nodes: list[str]) -> str:
    if len(nodes) == 1:
        return nodes[0]
    return "<mrow>" + "".join(nodes) + "</mrow>"


def _mo(ch: str, attrs: str = "") -> str:
    return f"<mo{attrs}>{_e(ch)}</mo>"


def _mi(ch: str, attrs: str = "") -> str:
    return f"<mi{attrs}>{_e(ch)}</mi>"


class _Parser:
    def __init__(self, src: str):
        self.toks = tokenize(src)
        self.i = 0
        self.breaks: list[int] = []  # top-level node positions after which a line may break

    # helpers ------------------------------------------------------------------------------------
    def peek(self, skip_space: bool = True) -> Tok | None:
        j = self.i
        while skip_space and j < len(self.toks) and self.toks[j].kind == "space":
            j += 1
        return self.toks[j] if j < len(self.toks) else None

    def next(self, skip_space: bool = True) -> Tok:
        while skip_space and self.i < len(self.toks) and self.toks[self.i].kind == "space":
            self.i += 1
        if self.i >= len(self.toks):
            raise LatexError("unexpected end of input")
        t = self.toks[self.i]
        self.i += 1
        return t

    def raw_group(self) -> str:
        """The verbatim text of a {...} argument (for \\text, \\begin, \\operatorname)."""
        t = self.next()
        if t.kind != "open":
            if t.kind == "cmd":
                return "\\" + t.text
            return t.text
        depth, parts = 1, []
        while True:
            if self.i >= len(self.toks):
                raise LatexError("unbalanced braces")
            t = self.toks[self.i]
            self.i += 1
            if t.kind == "open":
                depth += 1
            elif t.kind == "close":
                depth -= 1
                if depth == 0:
                    return "".join(parts)
            parts.append("\\" + t.text if t.kind == "cmd" else t.text)

    def arg(self) -> str:
        """One argument: a braced group or a single token (a multi-digit number gives its first digit)."""
        t = self.peek()
        if t is None:
            raise LatexError("missing argument")
        if t.kind == "num" and len(t.text) > 1:
            self.next()
            self.toks.insert(self.i, Tok("num", t.text[1:]))
            return f"<mn>{t.text[0]}</mn>"
        if t.kind in ("sup", "sub", "close", "amp"):
            raise LatexError(f"missing argument before '{t.text}'")
        return self.atom()

    def optional(self) -> str | None:
        t = self.peek()
        if t is None or t.kind != "char" or t.text != "[":
            return None
        self.next()
        nodes = self.expr_list(stop_char="]")
        self.next()  # the ]
        return _mrow(nodes)

    # grammar ------------------------------------------------------------------------------------
    def expr_list(self, stop_char: str | None = None, top: bool = False, stop_at_row: bool = False) -> list[str]:
        nodes: list[str] = []
        while True:
            t = self.peek(skip_space=False)
            if t is None:
                return nodes
            if t.kind == "close":
                return nodes
            if t.kind == "space":
                self.i += 1
                continue
            if stop_char is not None and t.kind == "char" and t.text == stop_char:
                return nodes
            if t.kind == "cmd" and t.text in ("right", "end"):
                return nodes
            if stop_at_row and (t.kind == "amp" or (t.kind == "cmd" and t.text in ("\\", "cr"))):
                return nodes
            if t.kind == "amp" or (t.kind == "cmd" and t.text in ("\\", "cr")):
                raise LatexError(f"'{t.text}' outside an environment")
            if t.kind in ("sup", "sub"):
                base = nodes.pop() if nodes else "<mrow></mrow>"
                nodes.append(self.scripts(base))
                continue
            if t.kind == "char" and t.text == "'":
                self.i += 1
                base = nodes.pop() if nodes else "<mrow></mrow>"
                primes = "′"
                while (p := self.peek(skip_space=False)) is not None and p.kind == "char" and p.text == "'":
                    self.i += 1
                    primes += "′"
                nodes.append(f"<msup>{base}<mo>{primes}</mo></msup>")
                continue
            start = self.i
            node = self.atom()
            if node:
                if top and self._is_text(start) and nodes:
                    self.breaks.append(len(nodes))
                nodes.append(node)
                if top and self._breakable(start, node):
                    self.breaks.append(len(nodes))

    def _is_text(self, start: int) -> bool:
        t = self.toks[start]
        return t.kind == "cmd" and t.text in TEXT_CMDS

    def _breakable(self, start: int, node: str) -> bool:
        t = self.toks[start]
        if self._is_text(start) or (t.kind == "cmd" and t.text in ("quad", "qquad")):
            return True
        m = re.fullmatch(r"<mo[^>]*>(.*)</mo>", node)
        return bool(m and html.unescape(m.group(1)) in BREAK_AFTER)

    def scripts(self, base: str) -> str:
        sub = sup = None
        while (t := self.peek()) is not None and t.kind in ("sup", "sub"):
            self.next()
            a = self.arg()
            if t.kind == "sup":
                if sup is not None:
                    raise LatexError("double superscript")
                sup = a
            else:
                if sub is not None:
                    raise LatexError("double subscript")
                sub = a
        under = base.startswith(("<mo movablelimits", "<mo largeop"))
        if sub is not None and sup is not None:
            return f"<munderover>{base}{sub}{sup}</munderover>" if under else f"<msubsup>{base}{sub}{sup}</msubsup>"
        if sub is not None:
            return f"<munder>{base}{sub}</munder>" if under else f"<msub>{base}{sub}</msub>"
        assert sup is not None
        return f"<mover>{base}{sup}</mover>" if under else f"<msup>{base}{sup}</msup>"

    def delimiter(self) -> str:
        t = self.next()
        if t.kind == "char" and t.text in DELIMS:
            return "" if t.text == "." else t.text
        if t.kind == "cmd":
            if t.text in SYMBOL_CMDS and t.text in "|{}":
                return SYMBOL_CMDS[t.text]
            if t.text in OPERATORS:
                return OPERATORS[t.text]
        raise LatexError(f"unsupported delimiter '{t.text}'")

    def atom(self) -> str:
        t = self.next()
        k, s = t.kind, t.text
        if k == "open":
            nodes = self.expr_list()
            if self.next().kind != "close":
                raise LatexError("unbalanced braces")
            return _mrow(nodes) if nodes else "<mrow></mrow>"
        if k == "num":
            return f"<mn>{s}</mn>"
        if k == "char":
            if s.isalpha():
                return _mi(s)
            if s == "~":
                return '<mspace width="0.25em"></mspace>'
            if s == "-":
                return _mo("−")
            if s == "*":
                return _mo("∗")
            if s == "/":
                return '<mo lspace="0" rspace="0">/</mo>'
            if s == "$":
                return ""
            if s in "]}":
                pass
            return _mo(s)
        if k == "close":
            raise LatexError("unbalanced braces")
        if k == "amp":
            raise LatexError("'&' outside an environment")
        assert k == "cmd"
        return self.command(s)

    def command(self, s: str) -> str:
        if s in GREEK:
            return _mi(GREEK[s])
        if s in GREEK_UPPER:
            return _mi(GREEK_UPPER[s], ' mathvariant="normal"')
        if s in IDENTS:
            return _mi(IDENTS[s], ' mathvariant="normal"' if IDENTS[s] in "∞∅∂∇" else "")
        if s in SYMBOL_CMDS:
            ch = SYMBOL_CMDS[s]
            return _mo(ch, ' fence="true"') if ch in "‖{}" else _mo(ch)
        if s in SPACES:
            return f'<mspace width="{SPACES[s]}"></mspace>'
        if s in IGNORED:
            return ""
        if s in OPERATORS:
            return _mo(OPERATORS[s])
        if s in LIMIT_OPS:
            return _mo(LIMIT_OPS[s], ' movablelimits="true" form="prefix"')
        if s in BIG_OPS:
            return _mo(BIG_OPS[s], ' largeop="true" movablelimits="true"')
        if s in FUNCTIONS:
            return _mi(s) + "<mo>\u2061</mo>"
        if s in ("frac", "dfrac", "tfrac", "cfrac"):
            return f"<mfrac>{self.arg()}{self.arg()}</mfrac>"
        if s in ("binom", "dbinom", "tbinom", "choose"):
            if s == "choose":
                raise LatexError("\\choose is not supported")
            return f'<mrow><mo>(</mo><mfrac linethickness="0">{self.arg()}{self.arg()}</mfrac><mo>)</mo></mrow>'
        if s == "sqrt":
            idx = self.optional()
            body = self.arg()
            return f"<mroot>{body}{idx}</mroot>" if idx is not None else f"<msqrt>{body}</msqrt>"
        if s in ACCENTS:
            return f'<mover accent="true">{self.arg()}<mo stretchy="true">{ACCENTS[s]}</mo></mover>'
        if s in UNDER:
            return f'<munder accentunder="true">{self.arg()}<mo stretchy="true">{UNDER[s]}</mo></munder>'
        if s in ("overset", "stackrel"):
            top = self.arg()
            return f"<mover>{self.arg()}{top}</mover>"
        if s == "underset":
            bottom = self.arg()
            return f"<munder>{self.arg()}{bottom}</munder>"
        if s == "not":
            nxt = self.atom()
            m = re.fullmatch(r"<mo>(.*)</mo>", nxt)
            if not m:
                raise LatexError("\\not before a non-operator")
            return _mo(html.unescape(m.group(1)) + "\u0338")
        if s in TEXT_CMDS:
            return self.text(s)
        if s in FONT_CMDS:
            return self.font(s)
        if s in ("left", "right"):
            if s == "right":
                raise LatexError("\\right without \\left")
            return self.left_right()
        if s == "begin":
            return self.environment()
        if s in ("operatorname*",):
            return _mo(self.raw_group(), ' movablelimits="true" form="prefix"')
        raise LatexError(f"unsupported command \\{s}")

    def text(self, cmd: str) -> str:
        raw = self.raw_group()
        if "$" in raw:
            raise LatexError("math inside \\text")

        def unescape(m: re.Match) -> str:
            c = m.group(1)
            if c in SYMBOL_CMDS:
                return "|" if c == "|" else SYMBOL_CMDS[c]
            if c in (" ", ",", ";", ":"):
                return " "
            raise LatexError(f"unsupported command \\{c} in \\text")

        txt = re.sub(r"\\([A-Za-z]+|.)", unescape, raw)
        txt = txt.replace("~", "\u00a0")
        cls = {"textbf": ' class="mbf"', "textit": ' class="mit"', "texttt": ' class="mtt"',
               "textsf": ' class="msf"'}.get(cmd, "")
        # Spaces at either end are significant in LaTeX text but collapsed by MathML: keep them as nbsp.
        txt = re.sub(r"^\s+", "\u00a0", re.sub(r"\s+$", "\u00a0", txt))
        return f"<mtext{cls}>{_e(txt)}</mtext>"

    def font(self, cmd: str) -> str:
        if cmd in ("operatorname", "mathop"):
            inner = self.raw_group()
            if re.fullmatch(r"[A-Za-z ]+", inner):
                return _mi(inner.strip(), ' mathvariant="normal"' if len(inner.strip()) == 1 else "") + \
                    "<mo>\u2061</mo>"
            raise LatexError(f"unsupported \\{cmd} content")
        save = self.i
        raw = self.raw_group()
        if re.fullmatch(r"[A-Za-z0-9 ]+", raw):
            chars = [c for c in raw if c != " "]
            if cmd in ("mathbb", "mathds", "mathbbm"):
                return "".join(_mi(_alphabet(c, 0x1D538, 0x1D552, _DOUBLE_STRUCK)) for c in chars)
            if cmd in ("mathcal", "mathscr"):
                return "".join(_mi(_alphabet(c, 0x1D49C, 0x1D4B6, _SCRIPT)) for c in chars)
            if cmd == "mathfrak":
                return "".join(_mi(_alphabet(c, 0x1D504, 0x1D51E, _FRAKTUR)) for c in chars)
            if cmd == "mathrm" and len(chars) > 1 and raw.isalpha():
                return _mi(raw)
        # Fonts that styles can express: parse the argument as math and mark every identifier.
        self.i = save
        body = self.arg()
        cls = {"mathbf": "mbf", "boldsymbol": "mbi", "bm": "mbi", "mathsf": "msf", "mathtt": "mtt"}.get(cmd)
        if cmd in ("mathbb", "mathds", "mathbbm", "mathcal", "mathscr", "mathfrak"):
            raise LatexError(f"\\{cmd} of non-letters")
        upright = cmd in ("mathbf", "mathrm", "mathsf", "mathtt")
        attrs = (' mathvariant="normal"' if upright else "") + (f' class="{cls}"' if cls else "")
        return re.sub(r"<mi>", f"<mi{attrs}>", body)

    def left_right(self) -> str:
        open_ = self.delimiter()
        nodes = self.expr_list()
        t = self.next()
        if t.kind != "cmd" or t.text != "right":
            raise LatexError("\\left without \\right")
        close = self.delimiter()
        parts = []
        if open_:
            parts.append(_mo(open_, ' fence="true" stretchy="true"'))
        parts.extend(nodes)
        if close:
            parts.append(_mo(close, ' fence="true" stretchy="true"'))
        return "<mrow>" + "".join(parts) + "</mrow>"

    def environment(self) -> str:
        name = self.raw_group()
        if name not in ENVIRONMENTS:
            raise LatexError(f"unsupported environment {name}")
        if name == "array":
            self.raw_group()  # column spec
        rows: list[list[str]] = [[]]
        while True:
            cell = self.expr_list(stop_at_row=True)
            rows[-1].append(_mrow(cell) if cell else "<mrow></mrow>")
            t = self.next()
            if t.kind == "amp":
                continue
            if t.kind == "cmd" and t.text in ("\\", "cr"):
                self.optional()  # \\[2pt]
                rows.append([])
                continue
            if t.kind == "cmd" and t.text == "end":
                if self.raw_group() != name:
                    raise LatexError(f"\\begin{{{name}}} closed by another environment")
                break
            raise LatexError(f"unexpected '{t.text}' in {name}")
        if rows and rows[-1] == ["<mrow></mrow>"]:
            rows.pop()
        align = ' columnalign="left"' if name in ("cases", "aligned", "align", "align*", "split") else ""
        table = "<mtable" + align + ">" + "".join(
            "<mtr>" + "".join(f"<mtd>{c}</mtd>" for c in r) + "</mtr>" for r in rows) + "</mtable>"
        left, right = ENVIRONMENTS[name]
        parts = []
        if left:
            parts.append(_mo(left, ' fence="true" stretchy="true"'))
        parts.append(table)
        if right:
            parts.append(_mo(right, ' fence="true" stretchy="true"'))
        return "<mrow>" + "".join(parts) + "</mrow>"


def latex_nodes(src: str) -> tuple[list[str], list[int]]:
    """Parse a LaTeX math string into top-level MathML nodes and their break points."""
    p = _Parser(src)
    nodes = p.expr_list(top=True)
    if p.i < len(p.toks):
        t = p.toks[p.i]
        shown = "\\" + t.text if t.kind == "cmd" else t.text
        raise LatexError(f"unexpected '{shown}'")
    return nodes, p.breaks


def latex_to_mathml(src: str, display: bool = False, split: bool = True) -> str:
    """MathML for a LaTeX math string: one <math> element, or several when `split` breaks a long formula.

    Raises LatexError when the LaTeX uses something outside the supported subset.
    """
    nodes, breaks = latex_nodes(src)
    if not nodes:
        raise LatexError("empty formula")
    attr = ' display="block"' if display else ""
    if not split or display:
        return sanitize(f"<math{attr}>{_mrow(nodes)}</math>")
    chunks, last = [], 0
    for b in breaks + [len(nodes)]:
        if b > last:
            chunks.append(nodes[last:b])
            last = b
    return "<wbr>".join(sanitize(f"<math>{_mrow(c)}</math>") for c in chunks)


_DOLLAR = re.compile(r"(?<!\\)\$(.+?)(?<!\\)\$", re.DOTALL)


def render_statement(src: str) -> tuple[str, bool]:
    """HTML for a claim statement: (html, ok). Not-ok means the escaped source was returned in <code>.

    A statement is LaTeX math; one that contains $...$ is read as text with inline math.
    """
    if _DOLLAR.search(src):
        out, pos, ok = [], 0, True
        for m in _DOLLAR.finditer(src):
            out.append(_e(src[pos:m.start()]))
            piece, good = _math_or_source(m.group(1))
            out.append(piece)
            ok = ok and good
            pos = m.end()
        out.append(_e(src[pos:]))
        return "".join(out), ok
    return _math_or_source(src)


def _math_or_source(src: str) -> tuple[str, bool]:
    try:
        return latex_to_mathml(src), True
    except (LatexError, ET.ParseError, RecursionError) as exc:
        return (f'<code class="latex-src" title="{_e("not rendered: " + str(exc))}">{_e(src)}</code>', False)


# --------------------------------------------------------------------------------------------- sanitiser

ALLOWED_TAGS = {"math", "mi", "mn", "mo", "ms", "mtext", "mspace", "mrow", "mfrac", "msqrt", "mroot", "msub",
                "msup", "msubsup", "munder", "mover", "munderover", "mtable", "mtr", "mtd", "mstyle",
                "mpadded", "mphantom", "merror", "semantics", "mfenced"}
ALLOWED_ATTRS = {"display", "mathvariant", "class", "stretchy", "fence", "separator", "accent", "accentunder",
                 "movablelimits", "form", "width", "linethickness", "lspace", "rspace", "columnalign",
                 "largeop", "symmetric", "minsize", "maxsize", "displaystyle", "scriptlevel", "open", "close",
                 "separators"}
_XML_ENTITIES = {"lt", "gt", "amp", "quot", "apos"}


def _named_to_numeric(m: re.Match) -> str:
    name = m.group(1)
    if name in _XML_ENTITIES:
        return m.group(0)
    ch = html.unescape(f"&{name};")
    if ch == f"&{name};":
        raise LatexError(f"unknown entity &{name};")
    return "".join(f"&#{ord(c)};" for c in ch)


def _check(el: ET.Element) -> None:
    if el.tag not in ALLOWED_TAGS:
        raise LatexError(f"element <{el.tag}> not allowed in MathML")
    for a, v in el.attrib.items():
        if a not in ALLOWED_ATTRS or re.search(r"[\x00-\x1f]", v):
            raise LatexError(f"attribute {a} not allowed in MathML")
    for c in el:
        _check(c)


def sanitize(fragment: str, display: bool | None = None) -> str:
    """Re-serialise a MathML fragment keeping only whitelisted elements/attributes; wraps it in <math>."""
    text = re.sub(r"&([A-Za-z][A-Za-z0-9]*);", _named_to_numeric, fragment)
    # sympy prints strict relations unescaped (<mo><</mo>): not XML, fix them before parsing.
    text = re.sub(r"(<mo(?:\s[^<>]*)?>)<(</mo>)", r"\1&lt;\2", text)
    text = re.sub(r"(<mo(?:\s[^<>]*)?>)>(</mo>)", r"\1&gt;\2", text)
    root = ET.fromstring(text)
    if root.tag != "math":
        wrapper = ET.Element("math")
        wrapper.append(root)
        root = wrapper
    if display is not None:
        if display:
            root.set("display", "block")
        else:
            root.attrib.pop("display", None)
    _check(root)
    for el in root.iter("mo"):
        if el.text == "-":
            el.text = "−"  # a minus sign, not a hyphen
    return ET.tostring(root, encoding="unicode", method="html")


def sympy_mathml(mathml: str, display: bool = False) -> str:
    """Sanitised <math> element for sympy's presentation MathML (its named entities become numeric)."""
    return sanitize(mathml, display)
