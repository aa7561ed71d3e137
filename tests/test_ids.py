"""`cancho ids` (compiler/ids.py): per-declaration content hashes byte for byte as the
reference's encoder emits them (its docs/canonical-ast.md), and the properties the hashes exist
for: a rename of a local or a reformatting leaves an identity where it was, a changed body moves
only the body, a changed callee signature reaches its callers."""

from __future__ import annotations

import pytest

from cancho_kernel.compiler.fmt import format_text
from cancho_kernel.compiler.ids import identify
from cancho_kernel.compiler.parser import parse_file
from cancho_kernel.compiler.source import SourceFile

# The reference's golden fixtures (crates/cancho-id/tests/golden.rs): (source, declaration, sig, body).
GOLDEN = [
    ("fn f() -> [] int { return 0; }", "f",
     "1256033bac54eba7fee1a619018f2647e72379fd178c8f7cc958f74fb41a8ee3", "d0aa4d0beecc0bb1f31b368ff97ddfef1ceb6158bffecb108260c1eb264da1da"),
    ("fn f() -> [] int { return 7; }", "f",
     "1256033bac54eba7fee1a619018f2647e72379fd178c8f7cc958f74fb41a8ee3", "d035023cc0492f27c2cf11d5bdea65d55a68865b9c035cb174fa7f55e2adfb09"),
    ("fn f() -> [] bool { return true; }", "f",
     "af93b122140a4853822e08c02c24f69d20e2239401ef4bfc0be4f5a14e0b9f68", "e42a4bf7f638558e31f5dde0f813883ffde7b77f32085ef7ed66ad2b1640ceb3"),
    ("fn f() -> [] float { return 1.5; }", "f",
     "564dd353fa33f77c6b10e98cba4b82c5bf232b9e0ceffe3564f5fca656444fc8", "c3ac95e3c215f74e4006da4b39566792e71b704573ae2742cec5dd83a757b8e4"),
    ("fn f(a: int, b: int) -> [] int { return a * b - 1; }", "f",
     "c5e38ed91492e3078e8d7e85a77c385480a24650e3255b24fd28a602b77474b8", "54c98d15655c6099331560a492a0fee46e29922f27113cce2e6476bef25fc50c"),
    ("fn f(a: int) -> [] int { return (a << 2) ^ 0x3f; }", "f",
     "805d09c1834d1782d5dd867099c800ae8caf4a925df03bd6216e845215466bb3", "be960f39daee8eefb1d0f4b927c962f4ad1be5e1d458ce7c561c8bf453a5b4cc"),
    ("fn f(a: bool) -> [] bool { return !a; }", "f",
     "3e887039b6cdf8cc6cd8f6b9e9e89e36d6f2301c98840afaea3ed4fe21c749ff", "740b25c27f31e37684fa3bfe4c940335e981c4a35fb425a1ef85e6f1a1bebefb"),
    ("fn f(a: int) -> [] int { return ~a; }", "f",
     "805d09c1834d1782d5dd867099c800ae8caf4a925df03bd6216e845215466bb3", "ccb2d8d2357886649e5f97e40452361da51bfa18d56068bb2266d6b8fc1014ec"),
    ("fn f[&r](s: &r int) -> [] int { return *s; }", "f",
     "5cece7af3b661477bf6ca6f15ebe4ac7161bde13e52b26937db76c2c69404f82", "6ae4cf9d2500c29dc601a09346c77df94f4b585e309b8751bf3af0d496546ace"),
    ("fn f(a: int, b: int) -> [] bool { return a <= b; }", "f",
     "b1cb9ea2390a93432116fc6bd183d06d32ae4d2fd2da68bd7f650c9952dc9562", "ed3b3fe8f951d6dbc5e0202d646374637de21a527fd7a673a89bea2f59aba0b0"),
    ("fn g(n: int) -> [] int { return n; } fn f() -> [] int { return g(1); }", "f",
     "1256033bac54eba7fee1a619018f2647e72379fd178c8f7cc958f74fb41a8ee3", "cc6d0fc194d3700bdb273cecf278bc913c0f9c24482bdcc0fe55f98219ec6eac"),
    ("fn f(n: int) -> [] int { if n < 2 { return 1; } return n * f(n - 1); }", "f",
     "805d09c1834d1782d5dd867099c800ae8caf4a925df03bd6216e845215466bb3", "b3a801202e4487c9c1e8f3cf806faf603eb53d9a77ba188d87492a835740afc1"),
    ("fn f() -> [] int { let x = 1; return x; }", "f",
     "1256033bac54eba7fee1a619018f2647e72379fd178c8f7cc958f74fb41a8ee3", "1d1d1ba3aff384be7243f9dd7032fe72654b885ecd0728f0018c54ab3d695580"),
    ("fn f() -> [] int { var x = 1; x = 2; return x; }", "f",
     "1256033bac54eba7fee1a619018f2647e72379fd178c8f7cc958f74fb41a8ee3", "30d14edb520b271c2849f78a79ca8c883a4ea74fa51ac3c98d9f65009e4e8382"),
    ("fn f() -> [] int { var i = 0; while i < 3 { i = i + 1; } return i; }", "f",
     "1256033bac54eba7fee1a619018f2647e72379fd178c8f7cc958f74fb41a8ee3", "5d75f432c865c945485908522fcc546801269a3d179bf55b0cd9f3fc1988cf70"),
    ("fn f(a: bool) -> [] int { if a { return 1; } else { return 2; } }", "f",
     "8c4db275e617cbfa6af41335b1b324038389497946e773ba45947b19765a210e", "1133a7c137d6315d7b4b685f24b2118512ac5973f7ec3c2d842ea4ea09c9aac3"),
    ("struct P { x: int, y: int }", "P",
     "e11eee6bac21a5a49315ff9a19005ec1110514c4f6dfb34c75a63d8c37a08bba", "e11eee6bac21a5a49315ff9a19005ec1110514c4f6dfb34c75a63d8c37a08bba"),
    ("res struct F { fd: int }", "F",
     "14ee82f0af5819504be3b57aa6c95b78e92e4501d244ed89ea2627b137494ad4", "14ee82f0af5819504be3b57aa6c95b78e92e4501d244ed89ea2627b137494ad4"),
    ("struct P { x: int, y: int } fn f() -> [] P { return P { x: 1, y: 2 }; }", "f",
     "af070a452c2a34fff5b631b5e1c3b4cdc0b7f2399653595a03bbbd0d173533df", "ce7356de2b56f3b44cfd2eef23b4f6e5319ec5d50dfa492f5804fd7315e1594c"),
    ("struct P { x: int, y: int } fn f(p: P) -> [] int { return p.x; }", "f",
     "721f0425a4c2fc2f49643e8c20666f149f8a44e8531d940c4d6589f7fde5b2c6", "5f3625a33b2e60cec2383b13f95810a4c55e4ecc93135bfdac7bea5a5fedcd23"),
    ("struct P { x: int, y: int } fn f(p: P) -> [] int { let P { x, y } = p; return x; }", "f",
     "721f0425a4c2fc2f49643e8c20666f149f8a44e8531d940c4d6589f7fde5b2c6", "519b85c7af72e8abd4c049b314b982bad0c009419bbb910baffe3bfc336f9b6e"),
    ("enum Shape { Circle(int), Empty }", "Shape",
     "2ed02eb8649654a70196e1a7c082adcfb6fb2b1a6d132c47a2841dddab8db516", "2ed02eb8649654a70196e1a7c082adcfb6fb2b1a6d132c47a2841dddab8db516"),
    ("enum S { A(int), B } fn f(s: S) -> [] int { match s { S::A(n) => { return n; } S::B => { return 0; } } }", "f",
     "c408b605ae716a30b2efeb6064d3bdb20845ca819ed47c2a90e9615480559d42", "af2033e1744f46fceab69b3e9832d775481eb522c8edc8a6f27f03e563d88487"),
    ("fn f() -> [] (int, int) { return (1, 2); }", "f",
     "7b28a40a8fa79ee83521994dcfdaaa098f0e8266b41d83959c028ca71d0de21e", "ba9240db134cd3d682b1873f29d537374b2baca352f5fcde77e15d0f9215f352"),
    ("fn f(t: (int, int)) -> [] int { return t.0; }", "f",
     "f34f08d58e7308126cdfa60e9279ddd0db5e1ddc59daaa14c0c9fbb303a30d0e", "800e6b246e511748951f5bcde5ecbd209dc48794a711295f5c5a6133e9d92836"),
    ("fn f[&r](s: &r int) -> [] int { return 0; }", "f",
     "5cece7af3b661477bf6ca6f15ebe4ac7161bde13e52b26937db76c2c69404f82", "d0aa4d0beecc0bb1f31b368ff97ddfef1ceb6158bffecb108260c1eb264da1da"),
    ("fn f[&r](s: &!r int) -> [] int { return 0; }", "f",
     "ac1fc21fc858e4aadea0ad01c837067d66ff21ad7ae0c3067a945834ab9c295a", "d0aa4d0beecc0bb1f31b368ff97ddfef1ceb6158bffecb108260c1eb264da1da"),
    ("fn f[&r](s: &r [int]) -> [] int { return s[0]; }", "f",
     "943e84de1fbb448c6de509cd93dac59b53557b2e23271c16a786b6bf2d6f583f", "ea5e0270bac92246e005461bf8a56e69f98a1047d6506ff2f685c7da17a27d54"),
    ("fn f[&r](s: &r [int]) -> [] int { return len(s[1..2]); }", "f",
     "943e84de1fbb448c6de509cd93dac59b53557b2e23271c16a786b6bf2d6f583f", "299efbd9a213317d9a07a0a8104771c81108f56ba1c61ffae6bfc315605ac700"),
    ("fn f[T](x: T) -> [] T { return x; }", "f",
     "5dafe4ced0a131214c57d4178876b82450c2eda75dd552f72fea310db2de523a", "c721c66a48e2666914ea059e5641626db60f349a0c9dc5e23b056b4f8c915049"),
    ("fn f[&i](io: &!i Io) -> [io_write] int { return putchar(io, 65); }", "f",
     "abebd853d6b74e20b6a500ec16da5c0e7e031c8df44f2c153b40bd000d9dda63", "aa29f53ce4ad100feace478cea02fcf96d6792c88e490a261967def9f7d05e2b"),
    ('fn f[&f2](x: &f2 Ffi("libc")) -> [ffi("libc")] int { return 0; }', "f",
     "2bfdc94bf49275cacb3291eef592e4a887743c1d9e1accbf549570dda4df9f68", "d0aa4d0beecc0bb1f31b368ff97ddfef1ceb6158bffecb108260c1eb264da1da"),
    ('extern fn e[&f](x: &f Ffi("libc"), n: int) -> [ffi("libc")] int;', "e",
     "8375dd99689e873f2f1ae7e6716c06b54f23590b841a6a700d846a5df335e569", "8375dd99689e873f2f1ae7e6716c06b54f23590b841a6a700d846a5df335e569"),
    ("fn f() -> [] int { region a { let s = alloc_slice[a](2, 0); return len(s); } }", "f",
     "1256033bac54eba7fee1a619018f2647e72379fd178c8f7cc958f74fb41a8ee3", "a0f187ec697ea634ba264f5fffb5248b04e211b9315ff821674bc4698880f930"),
    ("static t: [int] { let s = alloc_slice[static](2, 0); return s; }", "t",
     "2b56a426d7383f96abbffef7d88ff507188d98a53c61c043fa27044421877ff3", "d29824f10a3518ddb72a4e9610ceb82dd1ab763de9d759215d63f4c4d695a80d"),
]


def ids_of(text: str):
    tree, diags = parse_file(SourceFile("<t>", text))
    assert tree is not None, diags
    return identify([tree])


def pair(text: str, name: str) -> tuple[str, str]:
    ids = ids_of(text)
    f = ids.function(name)
    if f is not None:
        return f.sig.hex(), f.body.hex()
    t = ids.type_decl(name)
    assert t is not None, name
    return t.id.hex(), t.id.hex()


@pytest.mark.parametrize("source, name, sig, body", GOLDEN, ids=[g[0][:40] for g in GOLDEN])
def test_the_reference_golden_hashes(source, name, sig, body):
    assert pair(source, name) == (sig, body)


PROGRAM = """\
struct P { x: int, y: int }

// doubles, then adds
fn f(n: int, p: P) -> [] int {
    let doubled = n * 2;
    let P { x, y } = p;
    if doubled > x { return doubled + y; } else if x > 0 { return x; }
    return helper(doubled);
}

fn helper(k: int) -> [] int { return k - 1; }
"""


def test_renaming_a_local_or_reformatting_leaves_every_identity():
    before = ids_of(PROGRAM)
    renamed = PROGRAM.replace("doubled", "d").replace("let P { x, y } = p;", "let P { y, x } = p;")
    assert ids_of(renamed) == before
    assert ids_of(format_text(PROGRAM)) == before
    nested = PROGRAM.replace("} else if x > 0 { return x; }", "} else { if x > 0 { return x; } }")
    assert ids_of(nested) == before  # `else if` is an `else` block of one `if`, as in the reference


def test_a_changed_body_moves_only_that_body():
    before = ids_of(PROGRAM)
    after = ids_of(PROGRAM.replace("return k - 1;", "return k - 2;"))
    assert after.function("helper").body != before.function("helper").body
    assert after.function("helper").sig == before.function("helper").sig
    assert after.function("f") == before.function("f")  # a caller depends on the sig only


def test_a_changed_signature_or_type_reaches_whoever_names_it():
    before = ids_of(PROGRAM)
    sig = ids_of(PROGRAM.replace("fn helper(k: int) -> [] int", "fn helper(k: int) -> [io_write] int"))
    assert sig.function("helper").sig != before.function("helper").sig
    assert sig.function("f").body != before.function("f").body
    ty = ids_of(PROGRAM.replace("struct P { x: int, y: int }", "struct P { x: int, y: bool }"))
    assert ty.type_decl("P").id != before.type_decl("P").id
    assert ty.function("f").sig != before.function("f").sig


def test_what_a_hash_must_tell_apart():
    base = "fn f(a: int, b: int) -> [] int { let (p, q) = (a, b); return p - q; }"
    assert pair(base, "f") != pair(base.replace("let (p, q)", "let (q, p)"), "f")
    assert pair(base, "f") != pair(base.replace("fn f(a: int, b: int)", "fn f(b: int, a: int)"), "f")
    neg = "fn f() -> [] int { return -5; }"
    assert pair(neg, "f") != pair(neg.replace("-5", "5"), "f")
    assert pair("fn f() -> [] float { return -0.0; }", "f") != pair("fn f() -> [] float { return 0.0; }", "f")


def test_mutual_recursion_hashes_without_a_cycle():
    src = ("fn even(n: int) -> [] bool { if n == 0 { return true; } return odd(n - 1); }\n"
           "fn odd(n: int) -> [] bool { if n == 0 { return false; } return even(n - 1); }\n")
    ids = ids_of(src)
    assert ids.function("even").body != ids.function("odd").body
    assert ids_of(src.replace("return false", "return true")).function("even").body == ids.function("even").body
