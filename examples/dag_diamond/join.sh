#!/bin/sh
# join.sh: B's and C's lines, in order
cat B.out C.out
