#!/bin/sh
# POST script of D: check.sh NODE RETURN -- the node succeeds only if its job did and the
# result holds both halves
[ "$2" = 0 ] || exit "$2"
grep -q "left part" result.txt && grep -q "right part" result.txt || { echo "result.txt is incomplete" >&2; exit 1; }
