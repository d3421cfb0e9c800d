#!/usr/bin/env python3
"""A pyarrow-written EnronQA-shaped parquet fixture (synthetic content) for engram's loader.

Writes tests/fixtures/enronqa/data/dev-00000-of-00001.parquet the way the hub's files are made
(pyarrow, Snappy, `datasets`-style list columns): one row per email with string columns
`email`, `path`, `user`, list<string> columns `questions`, `rephrased_questions`,
`gold_answers`, `rationales`, list<list<string>> columns `alternate_answers`,
`incorrect_answers`, and list<bool> `include_email`; small row groups so the reader crosses
them. Also writes expected.json: the facts engram must read (id `dev/<path>/<i>`).

Usage: python tests/peers/make_enronqa_fixture.py   (needs pyarrow)
"""
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "fixtures", "enronqa")

PEOPLE = ["gideon.fairweather", "bianca.vasquez", "kevin.abernathy"]
rows = []
for i in range(7):
    user = PEOPLE[i % 3]
    n = [2, 3, 0, 1, 4, 2, 3][i]
    path = f"{user}/inbox/{100 + i}."
    rows.append({
        "email": f"From: {user}@enron.example (synthetic)\nSubject: item {i}\n\nThe figure for item {i} is {1000 + 37 * i}.",
        "path": path,
        "user": user,
        "questions": [f"What is the figure {user} gave for item {i}, part {j}?" for j in range(n)],
        "rephrased_questions": [f"For item {i} (part {j}), which figure did {user} state?" for j in range(n)],
        "gold_answers": [f"{1000 + 37 * i + j}" for j in range(n)],
        "alternate_answers": [[f"{1000 + 37 * i + j}.0", f"about {1000 + 37 * i + j}"] for j in range(n)],
        "incorrect_answers": [[f"{2000 + j}"] for j in range(n)],
        "rationales": [f"The email states it in line {j}." for j in range(n)],
        "include_email": [j % 2 == 0 for j in range(n)],
    })

schema = pa.schema([
    ("email", pa.string()),
    ("path", pa.string()),
    ("user", pa.string()),
    ("questions", pa.list_(pa.string())),
    ("rephrased_questions", pa.list_(pa.string())),
    ("gold_answers", pa.list_(pa.string())),
    ("alternate_answers", pa.list_(pa.list_(pa.string()))),
    ("incorrect_answers", pa.list_(pa.list_(pa.string()))),
    ("rationales", pa.list_(pa.string())),
    ("include_email", pa.list_(pa.bool_())),
])
table = pa.Table.from_pylist(rows, schema=schema)
os.makedirs(os.path.join(OUT, "data"), exist_ok=True)
pq.write_table(table, os.path.join(OUT, "data", "dev-00000-of-00001.parquet"),
               compression="snappy", row_group_size=3)
expected = []
for r in rows:
    for j, (q, rq, a) in enumerate(zip(r["questions"], r["rephrased_questions"], r["gold_answers"])):
        expected.append({"id": f"dev/{r['path']}/{j}", "question": q, "rephrased_question": rq,
                         "answer": a, "source": r["email"], "user": r["user"]})
with open(os.path.join(OUT, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1)
print(f"wrote {len(rows)} emails, {len(expected)} facts, pyarrow {pa.__version__}")
