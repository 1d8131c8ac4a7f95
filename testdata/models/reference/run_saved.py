#!/usr/bin/python3
"""Loads a model directory with the shared plain-PyTorch reference loaders (the independent
implementation of HF's modeling code the fixtures were made with) and prints its logits on a
fixture's inputs, so gotpu's tests can check that what gotpu saves loads in Python unchanged.

usage: /usr/bin/python3 run_saved.py JOBS_JSON OUT_JSON
JOBS_JSON is a list of {"kind": "gpt2"|"llama"|"bert"|"qwen3"|"gemma3", "dir": DIR, "ref": REFERENCE_JSON}; OUT_JSON
gets one {"logits": [...flat float32 values...], "shape": [...]} per job (one process, so torch is
imported once).
"""
import sys

sys.dont_write_bytecode = True

import json

import torch

import bert_ref
import gemma3_ref
import gpt2_ref
import llama_ref
import qwen3_ref


def run(kind, d, ref_path):
    with open(ref_path) as f:
        ref = json.load(f)
    ids = torch.tensor(ref["input_ids"], dtype=torch.long)
    with torch.no_grad():
        if kind == "gpt2":
            m = gpt2_ref.GPT2LMHeadModel.from_pretrained(d, dtype=torch.float32)
            logits, _ = m(ids)
        elif kind == "llama":
            m = llama_ref.LlamaForCausalLM.from_pretrained(d, dtype=torch.float32)
            logits, _ = m(ids)
        elif kind == "qwen3":
            m = qwen3_ref.Qwen3ForCausalLM.from_pretrained(d, dtype=torch.float32)
            logits, _ = m(ids)
        elif kind == "gemma3":
            m = gemma3_ref.Gemma3ForCausalLM.from_pretrained(d, dtype=torch.float32)
            logits, _ = m(ids)
        elif kind == "bert":
            m = bert_ref.BertForSequenceClassification.from_pretrained(d, dtype=torch.float32)
            m.eval()
            logits, _ = m(ids, attention_mask=torch.tensor(ref["attention_mask"]),
                          token_type_ids=torch.tensor(ref["token_type_ids"]))
        else:
            raise SystemExit(f"unknown kind {kind}")
    return {"shape": list(logits.shape), "logits": [float(x) for x in logits.reshape(-1).tolist()]}


def main():
    jobs_path, out_path = sys.argv[1:3]
    torch.set_num_threads(1)
    with open(jobs_path) as f:
        jobs = json.load(f)
    results = [run(j["kind"], j["dir"], j["ref"]) for j in jobs]
    with open(out_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
