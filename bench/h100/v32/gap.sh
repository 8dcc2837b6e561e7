#!/bin/bash
# Device call 1 of stop 42 (issue 9): where a decode step's time between tokens goes. A build
# of 0b88cd7 with temporary timers (not committed: the diff is gap-timers.diff) printing, per
# token, queue.write_buffer of the inputs, queue.submit, and the readback's map_async, wait,
# mapped range, read (argmax), unmap and error check; against the one-pass GPU time (profile).
source bench/h100/v30/common.sh
B=.bin/timing; chmod +x $B
models $B Q8_0 Q4_K_M F16 8b
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
sum() {
  local f=$1
  for k in write submit; do echo -n "$k $(grep '^TIMING write' $f | awk -v k=$k '{for(i=1;i<=NF;i++) if($i==k) print $(i+1)}' | med) "; done
  for k in map_async wait range f unmap check; do echo -n "$k $(grep '^TIMING read' $f | awk -v k=$k '{for(i=1;i<=NF;i++) if($i==k) print $(i+1)}' | med) "; done
  echo "(medians, us)"
  grep -E "^decode tg|^CPU record|^wait for|whole batch" $f
}
$B bench $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
wait
for m in l1b-Q8_0 l1b-Q4_K_M l1b-F16 l8b; do
  for o in "" "--top-k 1"; do
    echo "### t=$(el) $m --prompt 512 --gen 128 --repeats 1 $o"
    $B bench $M/$m.gguf --prompt 512 --gen 128 --repeats 1 $o > /tmp/o.txt 2>&1; sum /tmp/o.txt
  done
  echo "### t=$(el) $m --prompt 512 --gen 8 --repeats 1 --profile"
  $B bench $M/$m.gguf --prompt 512 --gen 8 --repeats 1 --profile 2>&1 | grep -E "^decode tg|whole batch" | head -2
done
echo "done at t=$(el)"
