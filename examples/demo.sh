#!/usr/bin/env bash
# The caddy-hybrid-llm demo: builds Caddy with the module, starts a
# simulated self-hosted vLLM (127.0.0.1:8001) and a simulated cloud API
# (127.0.0.1:8002), and runs Caddy with examples/Caddyfile on :8080.
#
#   bash examples/demo.sh           run until Ctrl-C
#   bash examples/demo.sh --burst   baseline, peak, baseline: watch the overflow to the cloud and back, then exit
#   bash examples/demo.sh --check   scripted tour (normal, stream, burst, fallback), then exit
#   bash examples/demo.sh --multicloud
#                                   a cloud incident on examples/multicloud/Caddyfile, then exit:
#                                   five simulated clouds (127.0.0.1:8011-8015), steady traffic
#                                   to chat-main split 60/40 between cloud-a and cloud-b, cloud A
#                                   turns slow and failing, the health-score scheduler moves its
#                                   weight to cloud-b and back once A is well; the scheduler's log
#                                   and the switch time, then the canary, the mirror and the ledger
#
# Everything listens on loopback only.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mode=${1:-run}
state=$root/.demo
mkdir -p "$state" bin

export HYBRID_LISTEN=${HYBRID_LISTEN:-:8080}
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
gw=http://127.0.0.1:${HYBRID_LISTEN##*:}

echo "building bin/caddy and bin/llmsim ..."
go build -o bin/caddy ./xcaddy/cmd/caddy
go build -o bin/llmsim ./cmd/llmsim
go build -o bin/llmburst ./cmd/llmburst

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

if [ "$mode" = "--multicloud" ]; then
	# shellcheck source=examples/multicloud/demo-incident.sh
	. "$root/examples/multicloud/demo-incident.sh"
	exit 0
fi

bin/llmsim vllm --listen "$self_addr" --served-model-name "$SELF_MODEL" \
	--max-num-seqs 4 --ttft 40ms --itl 15ms >"$state/self.log" 2>&1 &
pids+=($!)
echo $! >"$state/self.pid"
bin/llmsim cloud --listen "${CLOUD_UPSTREAM#http://}" --model "$CLOUD_MODEL" \
	--api-key "$CLOUD_API_KEY" --ttft 80ms --itl 10ms >"$state/cloud.log" 2>&1 &
pids+=($!)
echo $! >"$state/cloud.pid"
bin/caddy run --config examples/Caddyfile --adapter caddyfile >"$state/caddy.log" 2>&1 &
pids+=($!)
echo $! >"$state/caddy.pid"

# wait (bounded) until the gateway answers
for _ in $(seq 1 100); do
	if curl -fsS -H "$auth" "$gw/v1/models" >/dev/null 2>&1; then break; fi
	sleep 0.1
done
curl -fsS -H "$auth" "$gw/v1/models" >/dev/null || { echo "gateway did not start; see $state/caddy.log"; tail -20 "$state/caddy.log"; exit 1; }

chat='{"model":"chat-main","messages":[{"role":"user","content":"Say hello"}],"max_tokens":8}'

burst() {
	echo "# a burst of <clients>x<duration> phases: ${BURST_PROFILE:-3x4s,24x6s,3x6s}"
	echo "#   self-hosted: 4 slots, 4 queued at most; overflow when vLLM queues 3, back at 0"
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
	# the answer names the alias (response_model), X-Hybrid-Model the name the upstream was sent
	grep -qi '^x-hybrid-model: '"$SELF_MODEL" "$state/head.txt" && grep -q '"model":"chat-main"' "$state/out.json" ||
		{ echo "unexpected: $(cat "$state/head.txt" "$state/out.json")"; exit 1; }
	cat "$state/out.json"; echo

	echo; echo "# 2. streaming passes through chunk by chunk"
	curl -sS -N "$gw/v1/chat/completions" -H "$auth" -H 'Content-Type: application/json' \
		-d '{"model":"chat-main","stream":true,"messages":[{"role":"user","content":"Say hello"}],"max_tokens":3}' | tee "$state/stream.txt"
	tail -2 "$state/stream.txt" | grep -q 'data: \[DONE\]' || { echo "stream did not end with [DONE]"; exit 1; }

	echo; echo "# 3. the peak goes to the cloud, the baseline stays self-hosted"
	BURST_PROFILE=3x3s,24x4s,3x4s burst

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

	echo; echo "# 4. the self-hosted simulator stops: the same alias falls back to the cloud, sent the cloud's model name"
	kill "$(cat "$state/self.pid")"
	wait "$(cat "$state/self.pid")" 2>/dev/null || true
	curl -sS -D "$state/head.txt" -o "$state/out.json" "$gw/v1/chat/completions" -H "$auth" -H 'Content-Type: application/json' -d "$chat"
	show < "$state/head.txt"
	grep -qi '^x-hybrid-model: '"$CLOUD_MODEL" "$state/head.txt" && grep -q '"model":"chat-main"' "$state/out.json" ||
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
X-Hybrid-Target turns to "cloud" and the answer's model to $CLOUD_MODEL:

  kill \$(cat $state/self.pid)

Operate it (admin API on $HYBRID_ADMIN):

  bin/caddy hybrid-llm state --address $HYBRID_ADMIN
  bin/caddy hybrid-llm drill --alias chat-main --address $HYBRID_ADMIN
  bin/caddy hybrid-llm drain --group self --address $HYBRID_ADMIN     (undrain to undo)
  bin/caddy hybrid-llm ledger --window 1h --address $HYBRID_ADMIN
  bin/caddy hybrid-llm clients --address $HYBRID_ADMIN

Or keep it running but make its /health fail (Caddy's active health check
takes it out within 2s):

  curl -X POST http://$self_addr/_sim/health -d '{"healthy":false}'

TXT
wait
