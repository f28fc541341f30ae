"""Chat SFT data: render conversations with the chat template, train only on the assistant's tokens, pack."""

import random

import torch
from datasets import load_dataset
from transformers import AutoTokenizer

IGNORE_INDEX = -100
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}{% endif %}"
    "{% endfor %}"
)


def load_tokenizer(name: str, chat_template: str = CHAT_TEMPLATE):
    tokenizer = AutoTokenizer.from_pretrained(name, use_fast=True)
    tokenizer.chat_template = chat_template
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.unk_token
    tokenizer.padding_side = "right"
    return tokenizer


def merge_system_prompt(messages: list) -> list:
    """The template has no system role: fold a system message into the first user turn."""
    if not messages or messages[0]["role"] != "system":
        return messages
    system, rest = messages[0]["content"], messages[1:]
    first = {"role": "user", "content": system + "\n\n" + rest[0]["content"]}
    return [first] + rest[1:]


def tokenize_conversation(tokenizer, messages: list, max_seq_length: int, train_on_prompt: bool = False):
    """Render the conversation turn by turn; the labels of the user turns are IGNORE_INDEX unless
    `train_on_prompt`, so that only the answers count in the loss."""
    messages = merge_system_prompt(messages)
    input_ids, labels = [], []
    for turn in range(len(messages)):
        prefix = tokenizer.apply_chat_template(messages[: turn + 1], tokenize=True)
        new_tokens = prefix[len(input_ids):]
        input_ids.extend(new_tokens)
        trained = messages[turn]["role"] == "assistant" or train_on_prompt
        labels.extend(new_tokens if trained else [IGNORE_INDEX] * len(new_tokens))
    if len(input_ids) > max_seq_length:
        input_ids, labels = input_ids[:max_seq_length], labels[:max_seq_length]
    return {"input_ids": input_ids, "labels": labels}


def pack_sequences(examples: list, max_seq_length: int, shuffle_seed: int = 0):
    """Greedy first-fit packing of tokenized examples into rows of `max_seq_length`; each row keeps per-document
    `segment_ids` and `position_ids` restarting at 0, so attention and rotary positions stay within a document."""
    order = list(range(len(examples)))
    random.Random(shuffle_seed).shuffle(order)
    rows, current = [], {"input_ids": [], "labels": [], "position_ids": [], "segment_ids": []}
    for doc, index in enumerate(order):
        example = examples[index]
        length = len(example["input_ids"])
        if current["input_ids"] and len(current["input_ids"]) + length > max_seq_length:
            rows.append(current)
            current = {"input_ids": [], "labels": [], "position_ids": [], "segment_ids": []}
        current["input_ids"] += example["input_ids"]
        current["labels"] += example["labels"]
        current["position_ids"] += list(range(length))
        current["segment_ids"] += [doc] * length
    if current["input_ids"]:
        rows.append(current)
    return rows


class PaddingCollator:
    """Pads a batch on the right to a multiple of `pad_to_multiple_of`; padded labels are IGNORE_INDEX."""

    def __init__(self, pad_token_id: int, pad_to_multiple_of: int = 8):
        self.pad_token_id = pad_token_id
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, features: list) -> dict:
        longest = max(len(f["input_ids"]) for f in features)
        width = -(-longest // self.pad_to_multiple_of) * self.pad_to_multiple_of
        batch = {"input_ids": [], "labels": [], "attention_mask": [], "position_ids": [], "segment_ids": []}
        for f in features:
            pad = width - len(f["input_ids"])
            batch["input_ids"].append(f["input_ids"] + [self.pad_token_id] * pad)
            batch["labels"].append(f["labels"] + [IGNORE_INDEX] * pad)
            batch["attention_mask"].append([1] * len(f["input_ids"]) + [0] * pad)
            batch["position_ids"].append(f.get("position_ids", list(range(len(f["input_ids"])))) + [0] * pad)
            batch["segment_ids"].append(f.get("segment_ids", [0] * len(f["input_ids"])) + [-1] * pad)
        return {key: torch.tensor(value) for key, value in batch.items()}


def build_dataset(data_files: dict, tokenizer, max_seq_length: int, packing: bool, train_on_prompt: bool,
                  seed: int = 42):
    raw = load_dataset("json", data_files=data_files)
    splits = {}
    for split, rows in raw.items():
        examples = [tokenize_conversation(tokenizer, row["messages"], max_seq_length, train_on_prompt)
                    for row in rows]
        examples = [e for e in examples if any(label != IGNORE_INDEX for label in e["labels"])]
        splits[split] = pack_sequences(examples, max_seq_length, seed) if packing and split == "train" else examples
    return splits
