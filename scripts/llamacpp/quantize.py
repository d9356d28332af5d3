#!/usr/bin/env python3
"""quantize.py - re-quantize a deepseek4 GGUF with llama.cpp's own
llama_model_quantize (through llama-cpp-python's ctypes API), as
`llama-quantize` does.

usage: python3 quantize.py IN.gguf OUT.gguf FTYPE [--pure] [--threads N]
FTYPE: F16, Q8_0, Q4_K_M, Q4_K_S, Q2_K, Q3_K_S, Q3_K_M, Q4_0, Q6_K,
IQ2_XXS, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0 (llama_ftype
names without LLAMA_FTYPE_MOSTLY_; F16: the tensors llama.cpp would
quantize become F16 instead; scripts/st2gguf.py --f16 writes F16 from a
safetensors checkpoint directly). --pure: every tensor gets the FTYPE's
base type (no mixing rules). Input tensors that are already quantized (Q8_0,
MXFP4 from the converter) are requantized (allow_requantize).
IQ2_XXS needs an importance matrix in llama.cpp (llama-quant.cpp
tensor_requires_imatrix); the C API takes it only as a C++ object, so this
tool reports llama.cpp's refusal for it.
env: LLAMA_CPP_LIB_PATH, PYTHONPATH as for llama_capture.py.
"""
import argparse
import sys

# llama.h enum llama_ftype
FTYPES = {"F16": 1, "Q4_0": 2, "Q8_0": 7, "Q2_K": 10, "Q3_K_S": 11, "Q3_K_M": 12, "Q4_K_S": 14, "Q4_K_M": 15,
          "Q6_K": 18, "IQ2_XXS": 19, "IQ4_NL": 25, "IQ4_XS": 30, "TQ1_0": 36, "TQ2_0": 37}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("ftype", choices=sorted(FTYPES))
    ap.add_argument("--pure", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    import llama_cpp.llama_cpp as L   # here, so FTYPES is importable without llama-cpp-python

    L.llama_backend_init()
    p = L.llama_model_quantize_default_params()
    p.ftype = FTYPES[a.ftype]
    p.nthread = a.threads
    p.allow_requantize = True
    p.pure = a.pure
    rc = L.llama_model_quantize(a.inp.encode(), a.out.encode(), p)
    if rc != 0:
        print(f"quantize: llama_model_quantize({a.ftype}) returned {rc}", file=sys.stderr)
        sys.exit(1)
    print(f"quantize: {a.inp} -> {a.out} ({a.ftype}{', pure' if a.pure else ''})")


if __name__ == "__main__":
    main()
