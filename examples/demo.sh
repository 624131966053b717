#!/usr/bin/env bash
# The caddy-hybrid-llm demo: builds Caddy with the module, starts a
# simulated self-hosted vLLM (127.0.0.1:8001) and a simulated cloud API
# (127.0.0.1:8002), and runs Caddy with examples/Caddyfile on 127.0.0.1:8080.
#
#   bash examples/demo.sh           run until Ctrl-C
#   bash examples/demo.sh --burst   baseline, peak, baseline: watch the overflow to the cloud and back, then exit
#                                   (CLOUD_RATE_LIMIT=20: the cloud takes 20 requests a second, then 429s)
#   bash examples/demo.sh --check   scripted tour (normal, stream, burst, fallback), then exit
#   bash examples/demo.sh --multicloud
#                                   a cloud incident on examples/multicloud/Caddyfile, then exit:
#                                   five simulated clouds (127.0.0.1:8011-8015), steady traffic
#                                   to chat-main split 60/40 between cloud-a and cloud-b, cloud A
#                                   turns slow and failing, the health-score scheduler moves its
#                                   weight to cloud-b and back once A is well; the scheduler's log
#                                   and the switch time, then the canary, the mirror and the ledger
#   bash examples/demo.sh --degrade
#                                   the degradation chain on examples/degradation/Caddyfile, then exit:
#                                   three simulated vLLMs, big (127.0.0.1:8021), medium (8022) and
#                                   small (8023), steady traffic to chat-main; big's KV cache climbs
#                                   past 85% (pre-emptive degrade to medium, kv_pressure, until the
#                                   cap), big dies (immediate degrade until the cap: the alert, then
#                                   503 with Retry-After), big returns; the gateway's degrade log,
#                                   the alias's degrade state and metrics
#
# Everything listens on loopback only.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mode=${1:-run}
state=$root/.demo
mkdir -p "$state" bin

export HYBRID_PORT=${HYBRID_PORT:-8080} HYBRID_BIND=${HYBRID_BIND:-127.0.0.1}
export HYBRID_ADMIN=${HYBRID_ADMIN:-localhost:2019}
export SELF_UPSTREAMS=${SELF_UPSTREAMS:-127.0.0.1:8001}
export SELF_MODEL=${SELF_MODEL:-qwen2.5-7b-instruct}
export CLOUD_UPSTREAM=${CLOUD_UPSTREAM:-http://127.0.0.1:8002}
export CLOUD_MODEL=${CLOUD_MODEL:-gpt-4o-mini}
export CLOUD_API_KEY=${CLOUD_API_KEY:-sk-demo-0123456789}
# one demo client; its key is what callers send (Authorization: Bearer)
export HYBRID_CLIENT_KEY=${HYBRID_CLIENT_KEY:-sk-demo-client-0123456789}
if [ "$mode" = "--multicloud" ]; then
	# a second client, "tester", whose X-Route-Tag counts (TRUSTED_CLIENTS in the multicloud Caddyfile)
	export HYBRID_TESTER_KEY=${HYBRID_TESTER_KEY:-sk-demo-tester-0123456789}
	export HYBRID_CLIENT_KEYS=${HYBRID_CLIENT_KEYS:-demo=$HYBRID_CLIENT_KEY tester=$HYBRID_TESTER_KEY}
else
	export HYBRID_CLIENT_KEYS=${HYBRID_CLIENT_KEYS:-demo=$HYBRID_CLIENT_KEY}
fi
auth="Authorization: Bearer $HYBRID_CLIENT_KEY"
self_addr=${SELF_UPSTREAMS%% *}
gw=http://127.0.0.1:$HYBRID_PORT

echo "building bin/caddy and bin/llmsim ..."
go build -o bin/caddy ./xcaddy/cmd/caddy
go build -o bin/llmsim ./examples/llmsim
go build -o bin/llmburst ./examples/llmburst

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

# wait_gateway PID: wait (bounded) until the gateway answers; fail if Caddy (PID) exits
wait_gateway() {
	for _ in $(seq 1 100); do
		kill -0 "$1" 2>/dev/null || break
		if curl -fsS -H "$auth" "$gw/v1/models" >/dev/null 2>&1; then break; fi
		sleep 0.1
	done
	kill -0 "$1" 2>/dev/null && curl -fsS -H "$auth" "$gw/v1/models" >/dev/null ||
		{ echo "gateway did not start; see $state/caddy.log"; tail -20 "$state/caddy.log"; exit 1; }
}

# start_sim NAME HEALTH-URL LLMSIM-ARGS...: start a simulator in the background and
# wait (bounded) until it answers HEALTH-URL; fail if it exits or does not answer
start_sim() {
	local name=$1 health=$2
	shift 2
	bin/llmsim "$@" >"$state/$name.log" 2>&1 &
	pids+=($!)
	echo $! >"$state/$name.pid"
	for _ in $(seq 1 50); do
		curl -fsS "$health" >/dev/null 2>&1 && return 0
		kill -0 "$(cat "$state/$name.pid")" 2>/dev/null || break
		sleep 0.1
	done
	echo "simulator $name did not start ($health); see $state/$name.log"; tail -5 "$state/$name.log"; exit 1
}

# ports_free VAR...: fail before starting anything when something already
# listens on the address a variable holds (its first one), naming the port
# and the variable that moves it
ports_free() {
	local var addr host port
	for var in "$@"; do
		addr=${!var%% *}
		addr=${addr#http://}
		case $addr in *:*) ;; *) addr=127.0.0.1:$addr ;; esac # a port alone
		host=${addr%:*} port=${addr##*:}
		case "$host" in "" | localhost) host=127.0.0.1 ;; esac
		if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
			echo "port $port is in use ($var=${!var}): stop what listens there, or set $var to a free address" >&2
			exit 1
		fi
	done
}

# now: Unix seconds with a fraction, the clock of the "ts" in Caddy's log
now() { date +%s.%N; }
# since T0 [T1]: seconds from T0 to T1 (default now), one decimal
since() { awk -v a="$1" -v b="${2:-$(now)}" 'BEGIN { printf "%.1f", b - a }'; }

# --multicloud: a cloud incident on examples/multicloud/Caddyfile
multicloud() {
	export CLOUD_A_UPSTREAM=${CLOUD_A_UPSTREAM:-http://127.0.0.1:8011} CLOUD_A_MODEL=${CLOUD_A_MODEL:-gpt-4o-mini}
	export CLOUD_B_UPSTREAM=${CLOUD_B_UPSTREAM:-http://127.0.0.1:8012} CLOUD_B_MODEL=${CLOUD_B_MODEL:-gpt-4o-mini}
	export CLOUD_C_UPSTREAM=${CLOUD_C_UPSTREAM:-http://127.0.0.1:8013} CLOUD_C_MODEL=${CLOUD_C_MODEL:-gpt-4o-mini}
	export MIRROR_UPSTREAM=${MIRROR_UPSTREAM:-http://127.0.0.1:8014} MIRROR_MODEL=${MIRROR_MODEL:-gpt-4o-next}
	export CANARY_UPSTREAM=${CANARY_UPSTREAM:-http://127.0.0.1:8015} CANARY_MODEL=${CANARY_MODEL:-gpt-4o-next}
	export CLOUD_A_API_KEY=${CLOUD_A_API_KEY:-sk-demo-cloud-a-0123456789}
	export CLOUD_B_API_KEY=${CLOUD_B_API_KEY:-sk-demo-cloud-b-0123456789}
	export CLOUD_C_API_KEY=${CLOUD_C_API_KEY:-sk-demo-cloud-c-0123456789}
	export MIRROR_API_KEY=${MIRROR_API_KEY:-sk-demo-mirror-0123456789}
	export CANARY_API_KEY=${CANARY_API_KEY:-sk-demo-canary-0123456789}
	local rate=${INCIDENT_RATE:-20} fail='{"error_rate":0.1,"error_status":503,"stall":"1.1s"}'

	# one simulated cloud: NAME UPSTREAM MODEL KEY [llmsim flags]
	sim() {
		local name=$1 addr=${2#http://} model=$3 key=$4
		shift 4
		start_sim "$name" "http://$addr/healthz" cloud --listen "$addr" --model "$model" --api-key "$key" "$@"
	}
	ports_free HYBRID_PORT HYBRID_ADMIN CLOUD_A_UPSTREAM CLOUD_B_UPSTREAM CLOUD_C_UPSTREAM MIRROR_UPSTREAM CANARY_UPSTREAM
	sim cloud-a "$CLOUD_A_UPSTREAM" "$CLOUD_A_MODEL" "$CLOUD_A_API_KEY" --ttft 40ms --itl 5ms
	sim cloud-b "$CLOUD_B_UPSTREAM" "$CLOUD_B_MODEL" "$CLOUD_B_API_KEY" --ttft 40ms --itl 5ms
	sim cloud-c "$CLOUD_C_UPSTREAM" "$CLOUD_C_MODEL" "$CLOUD_C_API_KEY" --ttft 40ms --itl 5ms
	sim mirror "$MIRROR_UPSTREAM" "$MIRROR_MODEL" "$MIRROR_API_KEY" --ttft 400ms --itl 50ms
	sim canary "$CANARY_UPSTREAM" "$CANARY_MODEL" "$CANARY_API_KEY" --ttft 40ms --itl 5ms
	bin/caddy run --config examples/multicloud/Caddyfile --adapter caddyfile >"$state/caddy.log" 2>&1 &
	pids+=($!)
	echo $! >"$state/caddy.pid"
	wait_gateway "$(cat "$state/caddy.pid")"

	local a=$CLOUD_A_UPSTREAM/_sim/failures
	echo
	echo "# 1. the incident: $rate requests/s to chat-main (client demo) all along; per second, where the answers landed"
	echo "#    (lines starting >> are the script's actions, at seconds since the traffic began)"
	local t0 tinj tclr burst_pid burst_rc=0
	t0=$(now)
	bin/llmburst -url "$gw" -key "$HYBRID_CLIENT_KEY" -rate "$rate" -duration 60s &
	burst_pid=$!
	pids+=("$burst_pid")
	sleep 5
	tinj=$(now)
	curl -fsS -o /dev/null -X POST "$a" -d "$fail" || { echo "could not inject failures at $a"; exit 1; }
	echo "  >> $(since "$t0" "$tinj")s  cloud A turns slow and failing: POST $a $fail"
	sleep 8
	tclr=$(now)
	curl -fsS -o /dev/null -X POST "$a" -d '{}' || { echo "could not clear the failures at $a"; exit 1; }
	echo "  >> $(since "$t0" "$tclr")s  cloud A is well again: POST $a {}"
	local back="" deadline=$((SECONDS + 25))
	while [ "$SECONDS" -lt "$deadline" ]; do
		if grep -q '"msg":"route healthy: cloud-a back at weight' "$state/caddy.log"; then back=1; break; fi
		sleep 0.2
	done
	if [ -n "$back" ]; then
		echo "  >> $(since "$t0")s  cloud A is back at its whole weight: the traffic stops"
	else
		echo "  >> $(since "$t0")s  cloud A is not back at its whole weight 25s after the failures ended: the traffic stops"
	fi
	kill -TERM "$burst_pid" 2>/dev/null || true
	wait "$burst_pid" || burst_rc=$?

	echo
	echo "# 2. the scheduler's log ($state/caddy.log, logger http.handlers.hybrid_llm), seconds since the failures began"
	grep '"logger":"http.handlers.hybrid_llm"' "$state/caddy.log" | grep -E '"msg":"(route|scheduler)[[ ]' >"$state/scheduler.log" || true
	local line ts lvl msg nums
	while IFS= read -r line; do
		ts=$(printf '%s\n' "$line" | grep -oE '"ts":[0-9.eE+]+' | sed -n 1p | cut -d: -f2)
		lvl=$(printf '%s\n' "$line" | grep -oE '^\{"level":"[a-z]+"' | cut -d'"' -f4 | tr a-z A-Z)
		msg=$(printf '%s\n' "$line" | sed -E 's/.*"msg":"(([^"\\]|\\.)*)".*/\1/')
		nums=$(printf '%s\n' "$line" | grep -oE '"(error_rate|p99_ms|requests|from|to)":[0-9.eE+-]+' | tr -d '"' | tr ':' '=' | tr '\n' ' ' || true)
		printf '  %ss  %-5s %s  %s\n' "$(awk -v a="$tinj" -v b="$ts" 'BEGIN { printf "%+6.2f", b - a }')" "$lvl" "$msg" "$nums"
	done <"$state/scheduler.log"

	# first_ts MSG-PREFIX: the ts of the first line whose msg starts with it
	first_ts() {
		grep -F "\"msg\":\"$1" "$state/scheduler.log" | sed -n 1p | grep -oE '"ts":[0-9.eE+]+' | cut -d: -f2
	}
	local missing="" want t_deg t_rec
	for want in 'route[cloud-a] ' 'scheduler degrade: weight cloud-a 60 -> 0' \
		'scheduler promote: weight cloud-b 40 -> 100' 'route recovered, traffic fully on cloud-b'; do
		[ -n "$(first_ts "$want")" ] || missing="$missing
    $want ..."
	done
	if [ -n "$missing" ]; then
		echo "FAILED: the scheduler did not log:$missing"
		exit 1
	fi
	t_deg=$(first_ts 'scheduler degrade: weight cloud-a 60 -> 0')
	t_rec=$(first_ts 'route recovered, traffic fully on cloud-b')
	echo
	echo "  failures injected -> cloud-a's weight at 0 (scheduler degrade):          $(awk -v a="$tinj" -v b="$t_deg" 'BEGIN { printf "%.3f", b - a }') s"
	echo "  failures injected -> traffic fully on cloud-b (route recovered):        $(awk -v a="$tinj" -v b="$t_rec" 'BEGIN { printf "%.3f", b - a }') s"
	if [ -z "$back" ]; then
		echo "FAILED: cloud-a did not come back at its whole weight (no 'route healthy: cloud-a back at weight' in 25s)"
		exit 1
	fi
	if [ "$burst_rc" != 0 ]; then
		echo "FAILED: some of the clients' requests failed during the incident (llmburst exit $burst_rc; see above)"
		exit 1
	fi

	echo
	echo "# 3. the colored canary: X-Route-Tag: canary from the trusted client tester, then from the client demo"
	local head=$state/head.txt
	curl -sS -D "$head" -o "$state/out.json" "$gw/v1/chat/completions" -H "Authorization: Bearer $HYBRID_TESTER_KEY" \
		-H 'X-Route-Tag: canary' -H 'Content-Type: application/json' -d "$chat"
	echo "  tester: $(grep -iE '^x-hybrid-(target|color):' "$head" | tr -d '\r' | tr '\n' ' ')"
	grep -qi '^x-hybrid-target: canary' "$head" && grep -qi '^x-hybrid-color: canary' "$head" ||
		{ echo "FAILED: the tester's tagged request did not go to the canary: $(cat "$head" "$state/out.json")"; exit 1; }
	curl -sS -D "$head" -o "$state/out.json" "$gw/v1/chat/completions" -H "Authorization: Bearer $HYBRID_CLIENT_KEY" \
		-H 'X-Route-Tag: canary' -H 'Content-Type: application/json' -d "$chat"
	echo "  demo:   $(grep -iE '^x-hybrid-(target|color):' "$head" | tr -d '\r' | tr '\n' ' ')"
	grep -qiE '^x-hybrid-target: cloud-(a|b)' "$head" && grep -qi '^x-hybrid-color: ignored' "$head" ||
		{ echo "FAILED: the demo client's tag was not ignored: $(cat "$head" "$state/out.json")"; exit 1; }

	echo
	echo "# 4. the mirror: ${MIRROR_RATIO:-10%} of chat-main copied to $MIRROR_MODEL, billed as validation (shadow)"
	sleep 1 # the last copies (the mirror answers 10x slower) finish
	bin/caddy hybrid-llm ledger --window 5m --address "$HYBRID_ADMIN" | tee "$state/ledger.txt"
	grep -qE 'validation \(mirrors, [0-9]+ requests\)' "$state/ledger.txt" ||
		{ echo "FAILED: the ledger has no validation (mirrors) line"; exit 1; }
	echo
	curl -fsS "http://$HYBRID_ADMIN/metrics" | grep -E 'caddy_hybrid_llm_(mirror_requests_total|tokens_total.*billing="shadow")' ||
		{ echo "FAILED: no mirror metrics"; exit 1; }
	echo; echo "multicloud demo passed"
}

# --degrade: the degradation chain on examples/degradation/Caddyfile
degrade() {
	export BIG_UPSTREAMS=${BIG_UPSTREAMS:-127.0.0.1:8021} BIG_MODEL=${BIG_MODEL:-llama-70b}
	export MEDIUM_UPSTREAMS=${MEDIUM_UPSTREAMS:-127.0.0.1:8022} MEDIUM_MODEL=${MEDIUM_MODEL:-llama-13b}
	export SMALL_UPSTREAMS=${SMALL_UPSTREAMS:-127.0.0.1:8023} SMALL_MODEL=${SMALL_MODEL:-llama-7b}
	export DEGRADE_CAP=${DEGRADE_CAP:-20%}
	# the simulators serve the first address of each group
	local rate=${DEGRADE_RATE:-10} big=${BIG_UPSTREAMS%% *} metrics=http://$HYBRID_ADMIN/metrics
	local kv=http://${BIG_UPSTREAMS%% *}/_sim/kv log=$state/caddy.log
	ports_free HYBRID_PORT HYBRID_ADMIN BIG_UPSTREAMS MEDIUM_UPSTREAMS SMALL_UPSTREAMS

	# one simulated vLLM (quick answers, slots enough that the demo's load never queues): NAME ADDR MODEL
	vsim() {
		start_sim "$1" "http://$2/health" vllm --listen "$2" --served-model-name "$3" --ttft 30ms --itl 5ms --max-num-seqs 64
	}
	vsim big "$big" "$BIG_MODEL"
	vsim medium "${MEDIUM_UPSTREAMS%% *}" "$MEDIUM_MODEL"
	vsim small "${SMALL_UPSTREAMS%% *}" "$SMALL_MODEL"
	bin/caddy run --config examples/degradation/Caddyfile --adapter caddyfile >"$log" 2>&1 &
	pids+=($!)
	echo $! >"$state/caddy.pid"
	wait_gateway "$(cat "$state/caddy.pid")"

	# the gateway's log lines (logger http.handlers.hybrid_llm) whose msg starts with MSG-PREFIX
	glines() { grep '"logger":"http.handlers.hybrid_llm"' "$log" | grep -F "\"msg\":\"$1" || true; }
	# log_count MSG-PREFIX: how many there are
	log_count() { glines "$1" | grep -c . || true; }
	# wait_log MSG-PREFIX SECONDS [N]: wait, at most SECONDS, until there are more than N (default 0)
	wait_log() {
		for _ in $(seq 1 $(($2 * 10))); do
			[ "$(log_count "$1")" -gt "${3:-0}" ] && return 0
			sleep 0.1
		done
		return 1
	}
	# field NAME: a field of the log line on stdin; msg, level (upper case), ts, or NAME=value for numbers
	field() {
		case $1 in
		msg) sed -E 's/.*"msg":"(([^"\\]|\\.)*)".*/\1/' ;;
		level) grep -oE '^\{"level":"[a-z]+"' | cut -d'"' -f4 | tr a-z A-Z ;;
		ts) grep -oE '"ts":[0-9.eE+]+' | sed -n 1p | cut -d: -f2 ;;
		*) grep -oE "\"$1\":[0-9.eE+-]+" | tr -d '"' | tr ':' '=' | awk -F= '{ printf "%s=%.3g\n", $1, $2 }' ;;
		esac
	}
	# logged MSG-PREFIX [N]: the (N+1)th such line (default the first), as LEVEL "msg" and its share
	logged() {
		local l
		l=$(glines "$1" | sed -n "$((${2:-0} + 1))p")
		echo "$(field level <<<"$l") \"$(field msg <<<"$l")\"$(field share <<<"$l" | sed 's/^./ &/')"
	}
	# until_t T: sleep until T seconds after the traffic began
	until_t() { sleep "$(awk -v a="$t0" -v b="$(now)" -v t="$1" 'BEGIN { d = a + t - b; if (d < 0) d = 0; printf "%.2f", d }')"; }
	# post URL BODY: a control request to a simulator
	post() { curl -fsS -o /dev/null -X POST "$1" -d "$2" || { echo "FAILED: POST $1 $2"; exit 1; }; }
	# degraded_for_failure: degraded answers counted with a reason other than the triggers' (the upper target failed)
	degraded_for_failure() {
		curl -fsS "$metrics" >"$state/metrics.txt" || true
		grep '^caddy_hybrid_llm_degraded_total{' "$state/metrics.txt" | grep -vE 'reason="(kv_pressure|slo_breach)"' || true
	}

	echo
	echo "# 1. the story: $rate requests/s to chat-main (client demo) all along; per second, where the answers landed,"
	echo "#    the degraded ones by reason (X-Hybrid-Degrade-Reason) and the failures by status and error code"
	echo "#    (lines starting >> are the script's actions and what the gateway did, at seconds since the traffic began)"
	local t0 tkill tback burst_pid cap0 first="" capped="" back="" n
	t0=$(now)
	bin/llmburst -url "$gw" -key "$HYBRID_CLIENT_KEY" -rate "$rate" -duration 55s > >(tee "$state/burst.txt") &
	burst_pid=$!
	pids+=("$burst_pid")

	until_t 4
	post "$kv" '{"usage":0.80}'
	post "$kv" '{"climb_to":0.97,"over":"6s"}'
	echo "  >> $(since "$t0")s  big's KV cache at 80%, climbing to 97% over 6s: POST $kv {\"usage\":0.80}, then {\"climb_to\":0.97,\"over\":\"6s\"}"
	if wait_log 'degrade on: big kv_pressure' 10; then
		echo "  >> $(since "$t0")s  the gateway: $(logged 'degrade on: big kv_pressure')"
		echo "           new requests go to medium (reason kv_pressure) while big is still healthy"
	else
		echo "  >> $(since "$t0")s  the gateway did not turn degrade on for big's KV cache within 10s"
	fi
	if wait_log 'degrade cap reached' 8; then
		echo "  >> $(since "$t0")s  the gateway: $(logged 'degrade cap reached')"
		echo "           at the cap a request is not degraded: it goes to big, which is healthy, so no request fails;"
		echo "           as big's answers bring the share under $DEGRADE_CAP, medium takes the next one: about 1 in 5 while the trigger is on"
	else
		echo "  >> $(since "$t0")s  the cap was not reached during the KV pressure"
	fi

	until_t 12
	post "$kv" '{}'
	echo "  >> $(since "$t0")s  big's KV cache is relieved: POST $kv {} (the floor removed)"
	if wait_log 'degrade off: big' 10; then
		echo "  >> $(since "$t0")s  the gateway: $(logged 'degrade off: big'); new requests stay on big"
		echo "           (the share stayed at the cap while the trigger was on: one crossing, 'degrade cap reached' logged"
		echo "           $(log_count 'degrade cap reached') time(s); it ends once the share is under 80% of the cap)"
	else
		echo "  >> $(since "$t0")s  the gateway did not turn degrade off for big within 10s"
	fi

	until_t 20
	cap0=$(log_count 'degrade cap reached')
	tkill=$(now)
	kill "$(cat "$state/big.pid")"
	echo "  >> $(since "$t0" "$tkill")s  big's node fails: its simulator (pid $(cat "$state/big.pid")) is killed"
	for _ in $(seq 1 80); do
		if [ -z "$first" ] && [ -n "$(degraded_for_failure)" ]; then
			first=$(degraded_for_failure | sed -n 1p | grep -oE 'reason="[^"]*"' | cut -d'"' -f2)
			echo "  >> $(since "$t0")s  the gateway degrades at once: the first answers from medium with reason $first, $(since "$tkill")s after the failure"
		fi
		if [ -z "$capped" ] && [ "$(log_count 'degrade cap reached')" -gt "$cap0" ]; then
			capped=1
			echo "  >> $(since "$t0")s  the gateway: $(logged 'degrade cap reached' "$cap0")"
			echo "           the alert: no further degrading, requests get 503 degrade_cap_reached with Retry-After"
		fi
		[ -n "$first" ] && [ -n "$capped" ] && break
		sleep 0.1
	done
	sleep 3

	tback=$(now)
	vsim big-back "$big" "$BIG_MODEL"
	echo "  >> $(since "$t0" "$tback")s  big is back: its simulator restarted on $big (a fresh one: no KV floor)"
	for _ in $(seq 1 150); do
		n=$(grep -c 'POST /v1/chat/completions .*status=200' "$state/big-back.log" || true)
		if [ -z "$back" ] && [ "$n" -ge 1 ]; then
			back=$(since "$tback")
			echo "  >> $(since "$t0")s  big answers again, ${back}s after its return (the gateway's health check passed)"
		fi
		[ "$n" -ge 10 ] && break
		sleep 0.1
	done
	if [ -n "$back" ] && [ "$n" -ge 10 ]; then
		echo "  >> $(since "$t0")s  big has answered 10 requests: the traffic goes on 2s, then stops"
		sleep 2
	else
		back=""
		echo "  >> $(since "$t0")s  big did not answer 10 requests within 15s of its return: the traffic stops"
	fi
	kill -TERM "$burst_pid" 2>/dev/null || true
	wait "$burst_pid" || true
	sleep 0.2 # tee prints the last lines

	echo
	echo "# 2. the gateway's degrade log ($log, logger http.handlers.hybrid_llm), seconds since the traffic began"
	glines 'degrade' >"$state/degrade.log"
	local line ts rel msg
	while IFS= read -r line; do
		ts=$(field ts <<<"$line")
		rel=$(awk -v a="$t0" -v b="$ts" 'BEGIN { printf "%.2f", b - a }')
		msg=$(field msg <<<"$line")
		printf '  %7ss  %-5s %s  %s\n' "$rel" "$(field level <<<"$line")" "$msg" "$(field share <<<"$line")"
	done <"$state/degrade.log"

	echo
	echo "# 3. the 503s in the access log, by what the gateway tried (llm_tried)"
	grep '"logger":"http.log.access' "$log" | grep '"status":503' | grep -oE '"llm_tried":\[[^]]*\]' | sort | uniq -c |
		sed -E 's/"llm_tried"://; s/^ */  /' || true

	echo
	echo "# 4. the alias's degrade state (GET http://$HYBRID_ADMIN/hybrid_llm/state) and metrics ($metrics)"
	curl -fsS "http://$HYBRID_ADMIN/hybrid_llm/state" >"$state/state.json" || { echo "FAILED: no state from the admin API"; exit 1; }
	echo "  chat-main degrade: $(tr -d ' \t\r\n' <"$state/state.json" | grep -oE '"degrade":\{"share":[^{}]*' | sed -n 1p |
		grep -oE '"(share|answered|degraded|cap|cap_reached)":[^,}]*' | tr -d '"' | tr ':' '=' | tr '\n' ' ')"
	curl -fsS "$metrics" >"$state/metrics.txt" || { echo "FAILED: no metrics"; exit 1; }
	grep -E '^caddy_hybrid_llm_(degraded_total|degrade_share_ratio|degrade_cap_reached|degrade_trigger_active)' "$state/metrics.txt" |
		sed 's/^/  /' || true

	local missing=""
	[ "$(log_count 'degrade on: big kv_pressure')" -gt 0 ] &&
		grep -q '^caddy_hybrid_llm_degraded_total{.*reason="kv_pressure"' "$state/metrics.txt" || missing="$missing
    no answer degraded for kv_pressure (a 'degrade on: big kv_pressure' line and degraded_total{reason=\"kv_pressure\"})"
	[ -n "$first" ] || missing="$missing
    no answer degraded at once after big died (degraded_total with a failure reason within 8s of the kill)"
	[ -n "$capped" ] || missing="$missing
    no 'degrade cap reached' line after big died"
	grep -q '503 degrade_cap_reached, Retry-After' "$state/burst.txt" || missing="$missing
    no 503 degrade_cap_reached with Retry-After while big was down"
	[ -n "$back" ] || missing="$missing
    big did not get traffic back after its return"
	if [ -n "$missing" ]; then
		echo "FAILED:$missing"
		exit 1
	fi
	echo; echo "degrade demo passed"
}

chat='{"model":"chat-main","messages":[{"role":"user","content":"Say hello"}],"max_tokens":8}'

if [ "$mode" = "--multicloud" ]; then
	multicloud
	exit 0
fi
if [ "$mode" = "--degrade" ]; then
	degrade
	exit 0
fi

ports_free HYBRID_PORT HYBRID_ADMIN SELF_UPSTREAMS CLOUD_UPSTREAM
bin/llmsim vllm --listen "$self_addr" --served-model-name "$SELF_MODEL" \
	--max-num-seqs 4 --ttft 40ms --itl 15ms --prefix-caching >"$state/self.log" 2>&1 &
pids+=($!)
echo $! >"$state/self.pid"
# start_cloud [RATE]: the simulated cloud, with RATE requests a second at
# most (beyond it 429 with Retry-After; default CLOUD_RATE_LIMIT, 0: none)
start_cloud() {
	bin/llmsim cloud --listen "${CLOUD_UPSTREAM#http://}" --model "$CLOUD_MODEL" \
		--api-key "$CLOUD_API_KEY" --ttft 80ms --itl 10ms --rate-limit "${1:-${CLOUD_RATE_LIMIT:-0}}" >>"$state/cloud.log" 2>&1 &
	pids+=($!)
	echo $! >"$state/cloud.pid"
}
: >"$state/cloud.log"
start_cloud
bin/caddy run --config examples/Caddyfile --adapter caddyfile >"$state/caddy.log" 2>&1 &
pids+=($!)
echo $! >"$state/caddy.pid"

wait_gateway "$(cat "$state/caddy.pid")"

burst() {
	echo "# a burst of <clients>x<duration> phases: ${BURST_PROFILE:-3x4s,24x6s,3x6s}"
	echo "#   self-hosted: 4 slots, 4 queued at most; overflow when vLLM queues 3, back at 0"
	if [ "${CLOUD_RATE_LIMIT:-0}" != 0 ]; then
		echo "#   the cloud takes $CLOUD_RATE_LIMIT requests a second, then answers 429 with Retry-After"
	fi
	bin/llmburst -url "$gw" -profile "${BURST_PROFILE:-3x4s,24x6s,3x6s}"
}

if [ "$mode" = "--burst" ]; then
	burst
	exit 0
fi

if [ "$mode" = "--check" ]; then
	show() { grep -iE '^(HTTP|x-hybrid|x-request-id)' || true; }
	echo; echo "# 1. chat-main is served by the self-hosted vLLM"
	curl -sS -D "$state/head.txt" -o "$state/out.json" "$gw/v1/chat/completions" -H "$auth" -H 'Content-Type: application/json' -d "$chat"
	show < "$state/head.txt"
	# the answer names the alias (response_model), and no header names the served model
	grep -qi '^x-hybrid-target: self' "$state/head.txt" && ! grep -qi '^x-hybrid-model' "$state/head.txt" &&
		grep -q '"model":"chat-main"' "$state/out.json" ||
		{ echo "unexpected: $(cat "$state/head.txt" "$state/out.json")"; exit 1; }
	cat "$state/out.json"; echo

	echo; echo "# 2. streaming passes through chunk by chunk"
	curl -sS -N "$gw/v1/chat/completions" -H "$auth" -H 'Content-Type: application/json' \
		-d '{"model":"chat-main","stream":true,"messages":[{"role":"user","content":"Say hello"}],"max_tokens":3}' | tee "$state/stream.txt"
	tail -2 "$state/stream.txt" | grep -q 'data: \[DONE\]' || { echo "stream did not end with [DONE]"; exit 1; }

	echo; echo "# 2a. Claude Code's request shape: POST /v1/messages?beta=true with the key in x-api-key, anthropic-version"
	echo "#     and -beta, a system prompt and a user turn marked cache_control, tools; served natively by the vLLM; its"
	echo "#     next turn carries the tool's call and result"
	for turn in 1 2; do
		msgs='{"role":"user","content":[{"type":"text","text":"The test TestParse fails: fix it.","cache_control":{"type":"ephemeral"}}]}'
		if [ "$turn" = 2 ]; then
			msgs="$msgs"',{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"Read","input":{"file_path":"parse.go"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"package parse"}]}'
		fi
		curl -sS -N "$gw/v1/messages?beta=true" -H "x-api-key: $HYBRID_CLIENT_KEY" -H 'anthropic-version: 2023-06-01' \
			-H 'anthropic-beta: claude-code-20250219,interleaved-thinking-2025-05-14' -H 'Content-Type: application/json' -d '{"model":"chat-main","max_tokens":32,"stream":true,
"metadata":{"user_id":"user_demo_account__session_1"},
"system":[{"type":"text","text":"You are Claude Code, a command line tool for software engineering.","cache_control":{"type":"ephemeral"}},
{"type":"text","text":"Work in the repository; read files before editing them; run the tests after each change; keep answers short."}],
"tools":[{"name":"Read","description":"Reads a file from the local filesystem.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}},
{"name":"Edit","description":"Replaces text in a file.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string"},"new_string":{"type":"string"}},"required":["file_path","old_string","new_string"]}}],
"messages":['"$msgs"']}' >"$state/messages.txt"
		grep -E '^event: (message_start|message_delta|message_stop)' "$state/messages.txt" | tr '\n' ' '; echo
		grep -o '"usage":{[^}]*}' "$state/messages.txt" | tail -1
		grep -q '^event: message_stop' "$state/messages.txt" && grep -q '"model":"chat-main"' "$state/messages.txt" ||
			{ echo "unexpected: $(cat "$state/messages.txt")"; exit 1; }
	done

	echo; echo "# 3. the peak goes to the cloud, the baseline stays self-hosted"
	BURST_PROFILE=3x3s,24x4s,3x4s burst

	echo; echo "# 3a. the same peak with a cloud that takes 20 requests a second: what it refuses waits on"
	echo "#     self-hosted up to its red line; what neither takes gets 429 with Retry-After, never 502"
	kill "$(cat "$state/cloud.pid")"
	wait "$(cat "$state/cloud.pid")" 2>/dev/null || true
	start_cloud 20
	for _ in $(seq 1 50); do curl -fsS "$CLOUD_UPSTREAM/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
	CLOUD_RATE_LIMIT=20 BURST_PROFILE=3x3s,24x4s,3x4s burst | tee "$state/limited.txt"
	grep -q 'cloud=' "$state/limited.txt" ||
		{ echo "unexpected: the rate-limited peak"; exit 1; }
	kill "$(cat "$state/cloud.pid")"
	wait "$(cat "$state/cloud.pid")" 2>/dev/null || true
	start_cloud
	for _ in $(seq 1 50); do curl -fsS "$CLOUD_UPSTREAM/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

	echo; echo "# 3b. operators: state, a fallback drill, and a drain for maintenance (caddy hybrid-llm ...)"
	hl() { bin/caddy hybrid-llm "$@" --address "$HYBRID_ADMIN"; }
	hl state
	hl drill --alias chat-main
	hl clients
	echo "# without a key:"
	curl -sS -o /dev/null -w '%{http_code}\n' "$gw/v1/chat/completions" -H 'Content-Type: application/json' -d "$chat" | grep -x 401 ||
		{ echo "a request without a key was not refused 401"; exit 1; }
	hl drain --group self
	curl -sS -D - -o /dev/null "$gw/v1/chat/completions" -H "$auth" -H 'Content-Type: application/json' -d "$chat" | show
	hl undrain --group self
	curl -sS -D - -o /dev/null "$gw/v1/chat/completions" -H "$auth" -H 'Content-Type: application/json' -d "$chat" | show

	echo; echo "# 4. the self-hosted simulator stops: the same alias falls back to the cloud, the answer still names the alias"
	kill "$(cat "$state/self.pid")"
	wait "$(cat "$state/self.pid")" 2>/dev/null || true
	curl -sS -D "$state/head.txt" -o "$state/out.json" "$gw/v1/chat/completions" -H "$auth" -H 'Content-Type: application/json' -d "$chat"
	show < "$state/head.txt"
	grep -qi '^x-hybrid-target: cloud' "$state/head.txt" && grep -q '"model":"chat-main"' "$state/out.json" ||
		{ echo "unexpected: $(cat "$state/head.txt" "$state/out.json")"; exit 1; }
	cat "$state/out.json"; echo
	echo "#    and a Messages request goes to the OpenAI cloud translated into chat completions"
	curl -sS -D "$state/head.txt" -o "$state/out.json" "$gw/v1/messages" -H "x-api-key: $HYBRID_CLIENT_KEY" \
		-H 'anthropic-version: 2023-06-01' -H 'Content-Type: application/json' \
		-d '{"model":"chat-main","max_tokens":8,"system":"Be brief.","messages":[{"role":"user","content":"Say hello"}]}'
	show < "$state/head.txt"
	grep -qi '^x-hybrid-translated: chat/completions' "$state/head.txt" && grep -q '"type":"message"' "$state/out.json" ||
		{ echo "unexpected: $(cat "$state/head.txt" "$state/out.json")"; exit 1; }
	cat "$state/out.json"; echo

	echo; echo "# 5. the cost ledger: all-cloud, all-self-hosted and the hybrid as run, over the last 5 minutes"
	hl ledger --window 5m

	if [ -n "${PROMTOOL:-}" ]; then
		echo; echo "# 6. promtool check metrics on the exposition after this traffic"
		curl -fsS "http://$HYBRID_ADMIN/metrics" >"$state/metrics.txt"
		grep -c '^caddy_hybrid_llm_' "$state/metrics.txt"
		"$PROMTOOL" check metrics <"$state/metrics.txt"
	fi

	echo; echo "# 7. the access log records where each request went (the last 3)"
	grep '"llm_alias"' "$state/caddy.log" | tail -3 | while IFS= read -r line; do
		printf '%s\n' "$line" | grep -oE '"(status|request_id|llm_[a-z_]+)":("[^"]*"|[^,}]*|\[[^]]*\])' | tr '\n' ' '
		echo
	done
	echo; echo "demo check passed"
	exit 0
fi

cat <<TXT

caddy-hybrid-llm demo is running (Ctrl-C stops everything).

  gateway         $gw   (Caddy admin on $HYBRID_ADMIN)
  self-hosted     http://$self_addr   simulated vLLM serving $SELF_MODEL (4 slots)
  cloud           $CLOUD_UPSTREAM   simulated cloud serving $CLOUD_MODEL
  logs            $state/{caddy,self,cloud}.log
  client key      $HYBRID_CLIENT_KEY   (client "demo"; a request without a key gets 401)

Send a request with the business alias only:

  curl -i $gw/v1/chat/completions -H 'Authorization: Bearer $HYBRID_CLIENT_KEY' \\
    -H 'Content-Type: application/json' -d '$chat'

Stream it:

  curl -N $gw/v1/chat/completions -H 'Authorization: Bearer $HYBRID_CLIENT_KEY' \\
    -H 'Content-Type: application/json' \\
    -d '{"model":"chat-main","stream":true,"messages":[{"role":"user","content":"hi"}]}'

Watch the overflow: a scripted burst prints, per second, where requests landed:

  bin/llmburst -url $gw -key $HYBRID_CLIENT_KEY -profile 3x4s,24x6s,3x6s

Watch the fallback: stop the self-hosted simulator, then send the request again.
X-Hybrid-Target turns to "cloud" (the answer's model stays chat-main):

  kill \$(cat $state/self.pid)

Operate it (admin API on $HYBRID_ADMIN):

  bin/caddy hybrid-llm state --address $HYBRID_ADMIN
  bin/caddy hybrid-llm drill --alias chat-main --address $HYBRID_ADMIN
  bin/caddy hybrid-llm drain --group self --address $HYBRID_ADMIN     (undrain to undo)
  bin/caddy hybrid-llm ledger --window 1h --address $HYBRID_ADMIN
  bin/caddy hybrid-llm clients --address $HYBRID_ADMIN

Or keep it running but make its /health fail (the gateway's probe takes it
out after two failed checks, within about 4s):

  curl -X POST http://$self_addr/_sim/health -d '{"healthy":false}'

TXT
wait
