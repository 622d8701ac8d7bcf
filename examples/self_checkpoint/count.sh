#!/bin/sh
# A self-checkpointing job: counts to $1, one step at a time, saving its count in "state" and
# exiting with 85 (checkpoint_exit_code) every $2 steps. htc sends "state" (and the captured
# stdout) to the submit side, then runs this script again in the same sandbox; after an
# eviction, the next run on any machine gets "state" back before it starts. Either way the
# script picks up where the checkpoint left it.
# An optional third argument names a file that records every step each process ran (the tests
# use it to see how much work an eviction cost).
n=$1
every=$2
trace=${3:-/dev/null}
i=0
[ -f state ] && i=$(cat state)
echo "start $i $(pwd)" >> "$trace"
while [ "$i" -lt "$n" ]; do
    sleep 1                         # one step's work
    i=$((i + 1))
    echo "step $i" >> "$trace"
    echo "step $i"
    if [ $((i % every)) -eq 0 ] && [ "$i" -lt "$n" ]; then
        echo "$i" > state.new && mv state.new state   # never a half-written checkpoint
        exit 85
    fi
done
echo "counted to $i" > result.txt
