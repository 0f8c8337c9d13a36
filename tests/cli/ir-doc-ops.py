#!/usr/bin/env python3
"""ir-doc-ops.py: docs/ir.md's tables of ops against ir/ops.def, the one
definition: every op of ops.def has one row (| `name` | operands |
attributes | result |) in a table under docs/ir.md's "## Ops", no row names
an op ops.def does not define, and each row's attributes (the backquoted
names in its third column, "same" for the row above's) are exactly the
op's required and optional ones, spelled as the text format spells them
(ir/attrs.def).

Usage: ir-doc-ops.py ROOT"""
import re
import sys


def defined_ops(root):
    """{op: set of attribute names} from ir/ops.def and ir/attrs.def."""
    spelling = {}
    for line in open(f"{root}/ir/attrs.def"):
        m = re.match(r"\s*IR_ATTR\(\s*(\w+),\s*(\w+),", line)
        if m:
            spelling[m.group(2)] = m.group(1)
    ops = {}
    for line in open(f"{root}/ir/ops.def"):
        m = re.match(r"\s*IR_OP\(\s*(\w+),\s*\w+,\s*\d+,\s*\d+,\s*([^,]+),\s*([^,]+),", line)
        if m:
            ops[m.group(1)] = {spelling[a] for a in re.findall(r"A\((\w+)\)", m.group(2) + m.group(3))}
    return ops, set(spelling.values())


def documented_ops(root):
    """[(op, set of attribute names, line number)] of docs/ir.md's op tables."""
    rows, in_ops, in_table, above = [], False, False, set()
    for no, line in enumerate(open(f"{root}/docs/ir.md"), 1):
        if line.startswith("## "):
            in_ops = line.strip() == "## Ops"
        if not in_ops:
            continue
        if re.match(r"\|\s*op\s*\|", line):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`(\w+)`", cols[0])
        if not in_table or not m:
            continue
        attrs = above if cols[2] == "same" else set(re.findall(r"`(\w+)", cols[2]))
        rows.append((m.group(1), attrs, no))
        above = attrs
    return rows


def main():
    root = sys.argv[1]
    ops, attr_names = defined_ops(root)
    rows = documented_ops(root)
    fail = []
    if len(ops) < 60 or len(rows) < 60:
        fail.append(f"read {len(ops)} ops from ir/ops.def and {len(rows)} rows from docs/ir.md: the formats changed?")
    seen = {}
    for op, attrs, no in rows:
        where = f"docs/ir.md:{no}"
        if op in seen:
            fail.append(f"{where}: {op} has a row already (line {seen[op]})")
        seen[op] = no
        if op not in ops:
            fail.append(f"{where}: {op} is not an op of ir/ops.def")
            continue
        unknown = attrs - attr_names
        if unknown:
            fail.append(f"{where}: {op}'s attributes {sorted(unknown)} are not attributes of ir/attrs.def")
        elif attrs != ops[op]:
            fail.append(f"{where}: {op}'s attributes are {sorted(attrs)}, ir/ops.def's {sorted(ops[op])}")
    for op in ops:
        if op not in seen:
            fail.append(f"docs/ir.md: no row for {op} (ir/ops.def) in the tables under ## Ops")
    for f in fail:
        print("FAIL:", f)
    print(f"ir-doc-ops: {len(ops)} ops, " + ("OK" if not fail else f"{len(fail)} failed"))
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
