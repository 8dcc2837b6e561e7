#!/bin/bash
# Device call 4 of stop 42 (issue 9), the warm machine of calls 2-3: llama.cpp CUDA on the 1B
# files at -d 512,4096 (its build from call 2), for the depth rows.
LB=/tmp/sbs/src/llama.cpp/build-cuda/bin/llama-bench; M=/tmp/sbs/models
for m in l1b-q8_0 l1b-q4_k_m l1b-f16; do
  echo "### llama-bench $m -p 512 -n 128 -ngl 99 -fa 0 -r 3 -d 512,4096"
  timeout 60 $LB -m $M/$m.gguf -p 512 -n 128 -ngl 99 -fa 0 -r 3 -d 512,4096 2>/dev/null | grep -E "tg128|pp512"
done
