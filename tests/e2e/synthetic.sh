# Synthetic evaluation records for the score, leaderboard and plot tests.
# Sourced, not run.

# rec MODEL ID SAMPLE OUTCOME [SPEEDUP]: one evaluation record.
rec() {
  local sp=""
  [ $# -ge 5 ] && sp=",\"speedup\":$5"
  echo "{\"schema_version\":1,\"kind\":\"evaluation\",\"run_name\":\"$1\",\"solutions\":\"dir_$1\",\"problem_id\":$2,\"sample\":$3,\"outcome\":\"$4\",\"reason\":\"\",\"world_size\":2,\"device\":\"cuda\"$sp}"
}

# synthetic_scores PKB DIR: two models' results, scored into DIR/scores.json
# (k 1,2; p 0,0.5,1,1.5,2). Outcomes span several categories and the whole
# taxonomy, so every table, curve and bar has something to draw.
synthetic_scores() {
  local pkb=$1 dir=$2
  { rec modelA 1 0 correct 2.0; rec modelA 1 1 correct 0.5; rec modelA 2 0 output_mismatch
    rec modelA 3 0 correct 1.5; rec modelA 4 0 harness_error; rec modelA 12 0 correct 1.2
    rec modelA 12 1 timeout; rec modelA 26 0 compile_error; rec modelA 40 0 correct 0.8; } >"$dir/modelA.jsonl"
  { rec modelB 1 0 correct 3.0; rec modelB 1 1 correct 2.5; rec modelB 2 0 correct 1.1
    rec modelB 9 0 runtime_error; rec modelB 12 0 shape_mismatch; rec modelB 21 0 correct 1.7
    rec modelB 33 0 forbidden_api; rec modelB 33 1 load_error; rec modelB 40 0 timing_anomaly; } >"$dir/modelB.jsonl"
  "$pkb" score "$dir/modelA.jsonl" "$dir/modelB.jsonl" --out "$dir/scores.json" --k 1,2 --p 0,0.5,1,1.5,2
}
