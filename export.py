"""
Export a trained run as an ordinary Hugging Face Llama model (safetensors + config.json), so that
`transformers` (LlamaForCausalLM) and tools built on it, such as lm-evaluation-harness, can load and score it.

    python export.py --out-dir=out/lev                                   # writes out/lev/hf and checks it
    python export.py --out-dir=out/lev --dest=hf/lev --dtype=bfloat16 --overwrite
    python export.py --out-dir=out/lev --keep-lev                        # LEV itself, not its table: out/lev/hf_lev
    lm_eval --model hf --model_args pretrained=out/lev/hf --tasks lambada_openai    # score the export

Every arm becomes an untied Llama whose input table is the run's input map evaluated on every id (LEV's V x D table
materialised); the export computes the same function as the run, and --check measures it. --keep-lev (lev runs) writes
the native export instead: a Llama whose input map is LEV with the run's parameters (analysis/hf_lev.py), loaded by
AutoModelForCausalLM.from_pretrained(dest, trust_remote_code=True) (and AutoTokenizer likewise), which generates and
trains as any transformers model. How, and why the models agree: analysis/hf_export.py.
"""
import sys

from analysis.hf_export import CHECKS, CHOICES, ExportConfig, export
from util.cli import parse


def main(argv=None):
    return export(parse(ExportConfig, argv, description=__doc__, checks=CHECKS, choices=CHOICES))


if __name__ == "__main__":
    try:
        main()
    except (OSError, ImportError, RuntimeError, ValueError) as e:
        sys.exit(f"error: {e}")
    except KeyboardInterrupt:                          # Ctrl-C: one line, exit 130 (128 + SIGINT), no traceback
        print("interrupted (Ctrl-C): the export's files written so far were removed.", file=sys.stderr)
        sys.exit(130)
