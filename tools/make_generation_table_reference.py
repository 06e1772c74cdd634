# Runs transformers' real generate() on a fake encoder-decoder whose next-token
# logits are a fixed function of (document, decoder prefix), and prints the
# expected sequences as C++ initializers for tests/model/seq2seq/generation_hf_table_test.cc.
import json, sys, warnings
warnings.filterwarnings("ignore")
import torch
import transformers
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import Seq2SeqLMOutput, BaseModelOutput

VOCAB = 8

def table_logits(document, prefix):
    h = (2166136261 + document * 7919) % 2147483647
    for t in prefix:
        h = (h * 1000003 + t + 1) % 2147483647
    out = []
    for v in range(VOCAB):
        x = (h * (2 * v + 3) + (v + 1) * 2654435761) % 100003
        out.append(x / 4096.0 - 12.0)
    return out

class TableConfig(PretrainedConfig):
    model_type = "table"
    def __init__(self, **kw):
        super().__init__(is_encoder_decoder=True, vocab_size=VOCAB, **kw)

class TableModel(PreTrainedModel):
    config_class = TableConfig
    main_input_name = "input_ids"
    def __init__(self, config):
        super().__init__(config)
        self.dummy = torch.nn.Parameter(torch.zeros(1))
    def get_encoder(self):
        raise RuntimeError("encoder_outputs are passed in")
    def prepare_inputs_for_generation(self, decoder_input_ids, encoder_outputs=None, **kwargs):
        return {"decoder_input_ids": decoder_input_ids, "encoder_outputs": encoder_outputs}
    def forward(self, decoder_input_ids=None, encoder_outputs=None, **kwargs):
        docs = encoder_outputs.last_hidden_state[:, 0, 0].long().tolist()
        rows = decoder_input_ids.tolist()
        logits = torch.tensor([table_logits(d, r) for d, r in zip(docs, rows)], dtype=torch.float32)
        return Seq2SeqLMOutput(logits=logits[:, None, :])

CASES = [
    ("greedy", dict(num_beams=1, max_length=12)),
    ("greedy_min_length", dict(num_beams=1, max_length=12, min_length=6)),
    ("greedy_no_repeat_2", dict(num_beams=1, max_length=14, no_repeat_ngram_size=2)),
    ("greedy_forced_bos_eos", dict(num_beams=1, max_length=7, forced_bos_token_id=4, forced_eos_token_id=2)),
    ("greedy_max_new_tokens", dict(num_beams=1, max_length=40, max_new_tokens=5)),
    ("greedy_two_eos", dict(num_beams=1, max_length=12, eos_token_id=[2, 5])),
    ("beam2_heuristic", dict(num_beams=2, max_length=12, early_stopping=False)),
    ("beam3_early", dict(num_beams=3, max_length=12, early_stopping=True)),
    ("beam3_never_lp2", dict(num_beams=3, max_length=12, early_stopping="never", length_penalty=2.0)),
    ("beam3_heuristic_lp2", dict(num_beams=3, max_length=12, early_stopping=False, length_penalty=2.0)),
    ("beam4_never_lp_negative", dict(num_beams=4, max_length=10, early_stopping="never", length_penalty=-0.5)),
    ("beam3_lp06_min_length", dict(num_beams=3, max_length=14, min_length=6, length_penalty=0.6)),
    ("beam3_no_repeat_2", dict(num_beams=3, max_length=14, no_repeat_ngram_size=2)),
    ("beam3_forced_bos_eos", dict(num_beams=3, max_length=8, forced_bos_token_id=4, forced_eos_token_id=2)),
    ("beam2_two_eos", dict(num_beams=2, max_length=12, eos_token_id=[2, 5])),
    ("beam4_return3", dict(num_beams=4, max_length=12, num_return_sequences=3)),
    ("beam3_max_new_tokens", dict(num_beams=3, max_length=40, max_new_tokens=6, length_penalty=1.5)),
]
DOCUMENTS = [0, 1, 2, 3, 4, 5]

def main():
    torch.manual_seed(0)
    model = TableModel(TableConfig(decoder_start_token_id=0, bos_token_id=0, eos_token_id=2, pad_token_id=1))
    model.eval()
    results = []
    for name, params in CASES:
        docs = torch.tensor(DOCUMENTS, dtype=torch.float32)
        hidden = docs[:, None, None].expand(len(DOCUMENTS), 1, 1).contiguous()
        input_ids = torch.zeros((len(DOCUMENTS), 1), dtype=torch.long)
        kw = dict(eos_token_id=2, pad_token_id=1, decoder_start_token_id=0, bos_token_id=0)
        kw.update(params)
        with torch.no_grad():
            out = model.generate(input_ids, encoder_outputs=BaseModelOutput(last_hidden_state=hidden),
                                 return_dict_in_generate=True, output_scores=True, use_cache=False, **kw)
        seqs = out.sequences.tolist()
        scores = out.sequences_scores.tolist() if getattr(out, "sequences_scores", None) is not None else []
        results.append((name, params, seqs, scores))
    json.dump([{"name": n, "params": p, "sequences": s, "scores": sc} for n, p, s, sc in results], sys.stdout, indent=0)

main()
