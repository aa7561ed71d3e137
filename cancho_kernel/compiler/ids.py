"""`cancho ids`: each declaration's content hash, as the reference's `docs/canonical-ast.md`
defines it (and `docs/hash-stability.md` measures).

A unit is one top-level declaration and hashes alone. A function has two identities: `sig` (its
name, generic and region counts, `val` bounds, `where` pairs, sorted effect row, parameter and
return types) and `body` (the implementation); a struct or enum has one, a foreign function's body
is its signature, and a `static`'s sig is its name and referent type. Bodies hash up to
alpha-equivalence: a reference to a local encodes its binder's position, a callee its `sig`, a
declared type its identity (which is what keeps mutual recursion acyclic), anything else its text.
Comments, layout, redundant parentheses and literal spellings never reach the tree, so they never
reach a hash. The bytes are the reference's: one-byte node tags, fixed-width little-endian
integers, length-prefixed strings and sequences, nested hashes as 32 raw bytes, a domain tag
(`cancho.sig.v1`, `cancho.body.v1`, `cancho.type.v1`) first, and BLAKE3 over the whole; the
reference's golden fixtures are pinned by `tests/test_ids.py`.

Where this tree differs from the reference's, the reference's encoding is kept: `-5` is one
literal there (a negated literal is encoded as the literal), `else if` is an `else` block holding
one `if`, and an extern's linker symbol is its name. An indirect call through an expression (a
form the reference's tree has no node for) encodes the callee expression after `CALL`.
"""

from __future__ import annotations

from typing import Optional

from . import ast
from .ids_body import hash_body
from .ids_encode import (Context, FunctionId, Identities, Names, TypeDeclId, hash_extern, hash_signature,
                         hash_static_type, hash_type_decl)

__all__ = ["FunctionId", "Identities", "TypeDeclId", "identify", "render_ids"]


def identify(files: list[ast.File], report: Optional[list[ast.File]] = None) -> Identities:
    """Every unit's identity in `files` (a whole program: its std modules included, so what they
    declare resolves); only the units of `report` (default: all) are listed."""
    units = [(f, item) for f in files for item in f.items]
    type_ids: Names = {}
    for _ in range(2):  # the second pass sees every declared type's first-pass identity
        known = dict(type_ids)
        for f, item in units:
            if isinstance(item, (ast.StructDecl, ast.EnumDecl)):
                type_ids[(f.module_name, item.name.name)] = hash_type_decl(item, Context(f, known))
    sig_ids: Names = {}
    for f, item in units:
        ctx = Context(f, type_ids)
        if isinstance(item, ast.FnDecl):
            sig_ids[(f.module_name, item.name.name)] = hash_signature(item, ctx)
        elif isinstance(item, ast.ExternFn):
            sig_ids[(f.module_name, item.name.name)] = hash_extern(item, ctx)
    listed = {id(f) for f in (report if report is not None else files)}
    types: list[TypeDeclId] = []
    functions: list[FunctionId] = []
    for f, item in units:
        if id(f) not in listed:
            continue
        ctx, key = Context(f, type_ids, sig_ids), (f.module_name, item.name.name)
        if isinstance(item, (ast.StructDecl, ast.EnumDecl)):
            types.append(TypeDeclId(item.name.name, f.module_name, type_ids[key]))
        elif isinstance(item, ast.FnDecl):
            functions.append(FunctionId(item.name.name, f.module_name, sig_ids[key], hash_body(item, ctx)))
        elif isinstance(item, ast.ExternFn):
            functions.append(FunctionId(item.name.name, f.module_name, sig_ids[key], sig_ids[key]))
        elif isinstance(item, ast.StaticDecl):
            functions.append(FunctionId(item.name.name, f.module_name, hash_static_type(item, ctx),
                                        hash_body(item, ctx)))
    return Identities(tuple(types), tuple(functions))


def render_ids(ids: Identities) -> str:
    """The reference's `cancho ids` report: `type`, then `sig`/`body` per function, full hex."""
    lines = [f"type {t.name:<24} {t.id.hex()}" for t in ids.types]
    for f in ids.functions:
        lines += [f"sig  {f.name:<24} {f.sig.hex()}", f"body {f.name:<24} {f.body.hex()}"]
    return "".join(line + "\n" for line in lines)
