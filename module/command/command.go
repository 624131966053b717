// Copyright 2026 The caddy-hybrid-llm Authors
// SPDX-License-Identifier: Apache-2.0

// Package command is the `caddy hybrid-llm` command: it inspects and
// steers a running gateway through its admin API (state, drain, undrain,
// drill, ledger, clients, weight, registry), printing tables or the
// API's JSON. It registers itself with Caddy's command line in an init.
//
// It knows the gateway only by the admin API's JSON (package adminapi):
// it must not import package hybridllm, nor any other part of the
// product but adminapi.
package command

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/hybridllm/caddy-hybrid-llm/module/adminapi"
	"github.com/spf13/cobra"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "hybrid-llm",
		Usage: "state|drain|undrain|drill|ledger|clients|weight|registry|help [--address <admin> | --config <file>] [--gateway <name>] [--json] ...",
		Short: "Inspects and steers a running hybrid_llm gateway through the admin API",
		Long: `
Talks to the admin API of a running Caddy (the address is found like the
stop and reload commands do: --address, else the admin address of the
--config file, else localhost:2019). state's first line names the admin
address and the Caddy process that answered.

  caddy hybrid-llm state                               groups, endpoints, health, load
  caddy hybrid-llm drain   --group self [--endpoint 10.0.0.5:8000]
  caddy hybrid-llm undrain --group self [--endpoint 10.0.0.5:8000]
  caddy hybrid-llm drill   --alias chat-main           one request to each endpoint of each target
  caddy hybrid-llm ledger  [--window 24h]              the cost comparison
  caddy hybrid-llm clients                             clients, limits, cloud spend and budget left
  caddy hybrid-llm weight  --alias chat-main --group cloud --weight 0   a weighted set member's weight
  caddy hybrid-llm registry get [groups/self]         what etcd holds under the gateway's prefix
  caddy hybrid-llm registry put groups/self '{"drained":true}'   checked, written, applied by every gateway
  caddy hybrid-llm registry rm  groups/self
  caddy hybrid-llm help [subcommand]                   this text, or a subcommand's

--gateway names the gateway when a config has several. --json prints the
admin API's JSON instead of a table.
`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Args = cobra.ArbitraryArgs
			cmd.RunE = runBare
			cmd.PersistentFlags().String("address", "", "The address of the admin API")
			cmd.PersistentFlags().StringP("config", "c", "", "Configuration file, to find the admin address")
			cmd.PersistentFlags().StringP("adapter", "a", "", "Name of the config adapter")
			cmd.PersistentFlags().String("gateway", "", "The gateway's name, when there are several")
			cmd.PersistentFlags().Bool("json", false, "Print JSON instead of a table")
			addSubcommands(cmd)
		},
	})
}

// adminAddress finds the admin API: --address, else the admin address of
// the --config file, else Caddy's default. A command reads its --config
// once, however many calls it makes.
func adminAddress(cmd *cobra.Command) (string, error) {
	if a, ok := adminAddresses.Load(cmd); ok {
		return a.(string), nil
	}
	fl := cmd.Flags()
	addrFlag, _ := fl.GetString("address")
	// an address as a URL, as one would paste it from a browser
	addrFlag = strings.TrimSuffix(strings.TrimPrefix(addrFlag, "http://"), "/")
	configFlag, _ := fl.GetString("config")
	adapterFlag, _ := fl.GetString("adapter")
	addr, err := caddycmd.DetermineAdminAPIAddress(addrFlag, nil, configFlag, adapterFlag)
	if err == nil {
		adminAddresses.Store(cmd, addr)
	}
	return addr, err
}

// adminAddresses are the admin addresses the commands found, by command.
var adminAddresses sync.Map

// adminCall sends a request to the admin API and returns the body of a 2xx.
func adminCall(cmd *cobra.Command, method, uri string, body any) ([]byte, error) {
	addr, err := adminAddress(cmd)
	if err != nil {
		return nil, err
	}
	var rd io.Reader
	headers := http.Header{}
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
		headers.Set("Content-Type", "application/json")
	}
	resp, err := caddycmd.AdminAPIRequest(addr, method, uri, headers, rd)
	if err != nil {
		if msg := err.Error(); strings.Contains(msg, "HTTP 404") &&
			!strings.Contains(msg, "gateway") && !strings.Contains(msg, "has no") && !strings.Contains(msg, "registry key") {
			// the route is missing, not a gateway, group or alias
			return nil, fmt.Errorf("the admin API at %s has no hybrid_llm routes: is it the gateway's Caddy? Name it with --address or --config (%v)", addr, err)
		}
		return nil, fmt.Errorf("admin API at %s: %v", addr, err)
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 16<<20))
}

func printJSON(cmd *cobra.Command, b []byte) bool {
	if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
		var out bytes.Buffer
		if json.Indent(&out, b, "", "  ") != nil {
			out.Write(b)
		}
		fmt.Fprintln(cmd.OutOrStdout(), strings.TrimSpace(out.String()))
		return true
	}
	return false
}

func cmdState(cmd *cobra.Command) error {
	uri := adminapi.PathState
	if gateway, _ := cmd.Flags().GetString("gateway"); gateway != "" {
		uri += "?gateway=" + url.QueryEscape(gateway)
	}
	b, err := adminCall(cmd, http.MethodGet, uri, nil)
	if err != nil || printJSON(cmd, b) {
		return err
	}
	var doc adminapi.StateDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("reading the state: %v", err)
	}
	writeAnswered(cmd, doc)
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "GATEWAY\tGROUP\tKIND\tENDPOINT\tHEALTH\tIN FLIGHT\tWAITING\tRUNNING\tKV\tNOTES")
	for _, g := range doc.Gateways {
		for _, grp := range g.Groups {
			notes := groupNotes(grp)
			if len(grp.Endpoints) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t%s\n", g.Name, grp.Name, grp.Kind, notes)
			}
			for _, ep := range grp.Endpoints {
				inflight := strconv.FormatInt(ep.InFlight, 10)
				if ep.RedLine > 0 {
					inflight += "/" + strconv.FormatInt(ep.RedLine, 10)
				}
				waiting, running, kv := "-", "-", "-"
				if ep.Metrics.AgeSeconds != nil {
					waiting, running = fmt.Sprint(ep.Metrics.Waiting), fmt.Sprint(ep.Metrics.Running)
					if !ep.Metrics.Fresh {
						waiting += " (stale)"
					}
				}
				if ep.Metrics.KVCacheUsage != nil {
					kv = fmt.Sprintf("%.0f%%", *ep.Metrics.KVCacheUsage*100)
				}
				var epNotes []string
				if len(ep.Misconfigured) > 0 {
					epNotes = append(epNotes, "MISCONFIGURED: does not serve "+strings.Join(ep.Misconfigured, ", "))
				}
				if ep.Drained {
					epNotes = append(epNotes, "drained")
				}
				if ep.Breaker != nil && ep.Breaker.State != "closed" {
					epNotes = append(epNotes, "breaker "+ep.Breaker.State)
				}
				if h := ep.HealthScore; h != nil && (h.Level != "ok" || h.Sick) {
					note := fmt.Sprintf("health %s at %d%% (errors %.1f%%, p99 %dms, %d requests)", h.Level, *ep.ServePercent,
						h.ErrorRate*100, h.P99Ms, h.Requests)
					if h.Sick {
						note += ", kept: the last in service"
					}
					epNotes = append(epNotes, note)
				}
				if notes != "" {
					epNotes = append(epNotes, notes)
				}
				health := ep.Health
				if ep.HealthError != "" {
					health += " (" + ep.HealthError + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Name, grp.Name, grp.Kind, ep.Address,
					health, inflight, waiting, running, kv, strings.Join(epNotes, "; "))
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printSets(cmd.OutOrStdout(), doc); err != nil {
		return err
	}
	printRegistries(cmd.OutOrStdout(), doc)
	return printChains(cmd.OutOrStdout(), doc)
}

// writeAnswered prints which Caddy answered: its admin address, process
// and gateways.
func writeAnswered(cmd *cobra.Command, doc adminapi.StateDoc) {
	addr, _ := adminAddress(cmd)
	names := make([]string, 0, len(doc.Gateways))
	for _, g := range doc.Gateways {
		names = append(names, g.Name)
	}
	who := ""
	if p := doc.Process; p != nil {
		who = fmt.Sprintf(" (Caddy %s, pid %d on %s)", p.Version, p.PID, p.Host)
	}
	gateways := "no gateways"
	if len(names) > 0 {
		gateways = "gateway " + strings.Join(names, ", ")
		if len(names) > 1 {
			gateways = "gateways " + strings.Join(names, ", ")
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "admin API %s%s: %s\n", addr, who, gateways)
}

// printRegistries prints, for each gateway with a registry, what it
// applied of it and how fresh that is.
func printRegistries(w io.Writer, doc adminapi.StateDoc) {
	for _, g := range doc.Gateways {
		r := g.Registry
		if r == nil {
			continue
		}
		contact := "etcd never answered"
		if r.StaleSeconds != nil {
			contact = fmt.Sprintf("etcd last answered %.1fs ago", *r.StaleSeconds)
		}
		fmt.Fprintf(w, "\n%s: registry %s at revision %d, %d gateway(s) sharing the red lines, %s\n", g.Name, r.Prefix, r.Revision, r.Members, contact)
	}
}

// printChains prints the aliases' degradation chains: the degraded share
// against its cap, and each upper target's trigger.
func printChains(w io.Writer, doc adminapi.StateDoc) error {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	header := false
	for _, g := range doc.Gateways {
		for _, al := range g.Aliases {
			d := al.Degrade
			if d == nil {
				continue
			}
			if !header {
				fmt.Fprintln(tw, "\nGATEWAY\tALIAS\tDEGRADED\tCAP\tTRIGGER\tSTATE")
				header = true
			}
			capNote := fmt.Sprintf("%.0f%%", d.Cap*100)
			if d.CapReached {
				capNote += " REACHED"
			}
			share := fmt.Sprintf("%.1f%% (%d of %d)", d.Share*100, d.Degraded, d.Answered)
			if len(d.Triggers) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t-\t-\n", g.Name, al.Name, share, capNote)
			}
			for _, tr := range d.Triggers {
				state := "off"
				if tr.Active {
					state = "ON " + tr.Reason + ": " + tr.Why
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", g.Name, al.Name, share, capNote, tr.Group, state)
			}
		}
	}
	return tw.Flush()
}

// printSets prints the weighted sets' members, with their health when
// the set is watched.
func printSets(w io.Writer, doc adminapi.StateDoc) error {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	header := false
	for _, g := range doc.Gateways {
		for _, al := range g.Aliases {
			for _, t := range al.Targets {
				if t.Weight == nil {
					continue
				}
				if !header {
					fmt.Fprintln(tw, "\nGATEWAY\tALIAS\tSET\tGROUP\tMODEL\tWEIGHT\tHEALTH\tSINCE\tERRORS\tP99\tREQUESTS")
					header = true
				}
				level, since, errs, p99, n := "-", "-", "-", "-", "-"
				if h := t.Health; h != nil {
					level, since = h.Level, h.Since
					if h.Sick {
						level += " (sick, kept)"
					}
					if h.Panic {
						level += " (panic)"
					}
					errs, p99, n = fmt.Sprintf("%.1f%%", h.ErrorRate*100), fmt.Sprintf("%dms", h.P99Ms), strconv.Itoa(h.Requests)
				}
				set := t.Set
				if t.Strategy != "" {
					set += " (" + t.Strategy + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\n", g.Name, al.Name, set, t.Group, t.Model,
					*t.Weight, *t.ConfiguredWeight, level, since, errs, p99, n)
			}
		}
	}
	return tw.Flush()
}

func groupNotes(grp adminapi.GroupState) string {
	var notes []string
	if grp.Drained {
		notes = append(notes, "group drained")
	}
	if o := grp.Overflow; o != nil && o.Active {
		notes = append(notes, "OVERFLOW ("+o.Reason+")")
	}
	if b := grp.Breaker; b != nil && b.State != "closed" {
		notes = append(notes, "group breaker "+b.State)
	}
	if mc := grp.ModelCheck; mc != nil {
		switch {
		case len(mc.Missing) > 0:
			notes = append(notes, "MODEL NAMES NOT LISTED: "+strings.Join(mc.Missing, ", "))
		case mc.Error != "":
			notes = append(notes, "model check: "+mc.Error)
		}
	}
	return strings.Join(notes, "; ")
}

func cmdDrain(cmd *cobra.Command, verb string) error {
	group, _ := cmd.Flags().GetString("group")
	endpoint, _ := cmd.Flags().GetString("endpoint")
	gateway, _ := cmd.Flags().GetString("gateway")
	if group == "" {
		return fmt.Errorf("--group is required")
	}
	path := adminapi.PathDrain
	if verb == "undrain" {
		path = adminapi.PathUndrain
	}
	b, err := adminCall(cmd, http.MethodPost, path, adminapi.ActionRequest{Gateway: gateway, Group: group, Endpoint: endpoint})
	if err != nil || printJSON(cmd, b) {
		return err
	}
	what := "group " + group
	if endpoint != "" {
		what = "endpoint " + endpoint + " of group " + group
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %sed\n", what, verb)
	var out struct {
		Still []string `json:"endpoints_still_drained"`
	}
	if json.Unmarshal(b, &out) == nil && len(out.Still) > 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "its endpoints %s stay drained: undrain them with --endpoint\n", strings.Join(out.Still, ", "))
	}
	return nil
}

func cmdWeight(cmd *cobra.Command) error {
	alias, _ := cmd.Flags().GetString("alias")
	group, _ := cmd.Flags().GetString("group")
	weight, _ := cmd.Flags().GetInt("weight")
	gateway, _ := cmd.Flags().GetString("gateway")
	if alias == "" || group == "" || weight < 0 {
		return fmt.Errorf("--alias, --group and --weight (0 or more) are required")
	}
	b, err := adminCall(cmd, http.MethodPost, adminapi.PathWeight, adminapi.ActionRequest{Gateway: gateway, Alias: alias, Group: group, Weight: &weight})
	if err != nil || printJSON(cmd, b) {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "alias %s, group %s: weight %d\n", alias, group, weight)
	return nil
}

func cmdDrill(cmd *cobra.Command) error {
	alias, _ := cmd.Flags().GetString("alias")
	gateway, _ := cmd.Flags().GetString("gateway")
	if alias == "" {
		return fmt.Errorf("--alias is required")
	}
	b, err := adminCall(cmd, http.MethodPost, adminapi.PathDrill, adminapi.ActionRequest{Gateway: gateway, Alias: alias})
	if err != nil || printJSON(cmd, b) {
		return err
	}
	var out struct {
		Targets []adminapi.DrillResult `json:"targets"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("reading the drill: %v", err)
	}
	failed, endpoints, err := writeDrill(cmd.OutOrStdout(), out.Targets)
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d targets failed the drill (%d of their endpoints)", failed, len(out.Targets), endpoints)
	}
	return nil
}

// writeDrill prints a drill's results as a table, a line per endpoint of
// each target, "-" for what did not happen (no status or latency from an
// endpoint that could not be reached), and returns how many targets and
// how many endpoints failed.
func writeDrill(w io.Writer, targets []adminapi.DrillResult) (failed, failedEndpoints int, err error) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tMODEL\tENDPOINT\tRESULT\tSTATUS\tLATENCY\tANSWERED AS\tERROR")
	for _, r := range targets {
		if !r.OK {
			failed++
		}
		eps := r.Endpoints
		if len(eps) == 0 { // an older gateway's answer
			eps = []adminapi.DrillEndpoint{{DrillAnswer: r.DrillAnswer}}
		}
		for _, e := range eps {
			result := "ok"
			if !e.OK {
				result, failedEndpoints = "FAILED", failedEndpoints+1
			}
			addr, status, latency, answered := "-", "-", "-", "-"
			if e.Address != "" {
				addr = e.Address
			}
			if e.Reachable {
				status, latency = strconv.Itoa(e.Status), fmt.Sprintf("%.0fms", e.LatencyMS)
			}
			if e.AnsweredModel != "" {
				answered = e.AnsweredModel
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Group, r.Model, addr, result, status, latency, answered, e.Error)
		}
	}
	return failed, failedEndpoints, tw.Flush()
}

// usd prints an amount in dollars: cents from a dollar up, and three
// significant digits below, so that a short window's costs (a fraction
// of a cent) still compare.
func usd(v float64) string {
	a := math.Abs(v)
	if a == 0 || a >= 1 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	decimals := min(2-int(math.Floor(math.Log10(a))), 9)
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

func cmdLedger(cmd *cobra.Command) error {
	window, _ := cmd.Flags().GetString("window")
	gateway, _ := cmd.Flags().GetString("gateway")
	uri := adminapi.PathLedger + "?window=" + window
	if gateway != "" {
		uri += "&gateway=" + url.QueryEscape(gateway)
	}
	b, err := adminCall(cmd, http.MethodGet, uri, nil)
	if err != nil || printJSON(cmd, b) {
		return err
	}
	var out adminapi.LedgerDoc
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("reading the ledger: %v", err)
	}
	defer func() {
		// then each client's share, when there are clients
		ct := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
		header := false
		for _, g := range out.Gateways {
			for _, u := range g.Clients {
				if !header {
					fmt.Fprintln(ct, "\nGATEWAY\tCLIENT\tPROMPT\tCOMPLETION\tSELF-HOSTED TOKENS\tSELF-HOSTED USD\tCLOUD USD")
					header = true
				}
				fmt.Fprintf(ct, "%s\t%s\t%d\t%d\t%d\t%.6f\t%.6f\n", g.Gateway, u.Client, u.PromptTokens, u.CompletionTokens,
					u.SelfHostedTokens, u.SelfHostedUSD, u.CloudUSD)
			}
		}
		_ = ct.Flush()
	}()
	defer func() {
		// the break-even figures, under the table
		for _, g := range out.Gateways {
			var parts []string
			if v := g.HybridBeatsSelfHostedAbove; v != nil {
				parts = append(parts, fmt.Sprintf("the hybrid costs less than all-self-hosted above $%.2f per GPU-month", *v))
			}
			if v := g.HybridBeatsCloudBelow; v != nil {
				parts = append(parts, fmt.Sprintf("the hybrid costs less than all-cloud below $%.2f per GPU-month", *v))
			}
			if v := g.BreakEvenUtilization; v != nil {
				if *v > 1 {
					// a GPU busy all the time still costs more than the cloud
					parts = append(parts, fmt.Sprintf("a self-hosted GPU does not pay for itself at these prices, even fully used (it would need %.0f%% utilization)", *v*100))
				} else {
					parts = append(parts, fmt.Sprintf("a self-hosted GPU pays for itself above %.1f%% utilization", *v*100))
				}
			}
			if len(parts) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", g.Gateway, strings.Join(parts, "; "))
			}
		}
	}()
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "GATEWAY\tSCENARIO\tGPUS\tUTILIZATION\tSELF-HOSTED USD\tCLOUD USD\tTOTAL USD")
	for _, g := range out.Gateways {
		names := [...]string{"all cloud", "all self-hosted", "hybrid (as run)"}
		for i, sc := range g.Scenarios() {
			util := "-"
			if sc.Utilization != nil {
				util = fmt.Sprintf("%.1f%%", *sc.Utilization*100)
			}
			fmt.Fprintf(tw, "%s\t%s\t%g\t%s\t%s\t%s\t%s\n", g.Gateway, names[i], sc.GPUs, util,
				usd(sc.SelfHostedUSD), usd(sc.CloudUSD), usd(sc.TotalUSD))
		}
		if v := g.Validation; v != nil {
			// mirror copies: in no scenario, and in no business bill
			fmt.Fprintf(tw, "%s\tvalidation (mirrors, %d requests)\t\t\t\t\t%s\n", g.Gateway, v.Requests, usd(v.USD))
		}
	}
	return tw.Flush()
}

func cmdClients(cmd *cobra.Command) error {
	gateway, _ := cmd.Flags().GetString("gateway")
	uri := adminapi.PathClients
	if gateway != "" {
		uri += "?gateway=" + url.QueryEscape(gateway)
	}
	b, err := adminCall(cmd, http.MethodGet, uri, nil)
	if err != nil || printJSON(cmd, b) {
		return err
	}
	var out adminapi.ClientsList
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("reading the clients: %v", err)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "GATEWAY\tCLIENT\tALIASES\tRPM\tTPM\tWAIT\tCLOUD USD TODAY\tMONTH\tBUDGET LEFT")
	dash := func(n int) string {
		if n == 0 {
			return "-"
		}
		return strconv.Itoa(n)
	}
	for _, g := range out.Gateways {
		for _, c := range g.Clients {
			aliases, left, wait := "all", "-", "-"
			if len(c.Aliases) > 0 {
				aliases = strings.Join(c.Aliases, ",")
			}
			if c.BudgetLeftUSD != nil {
				left = fmt.Sprintf("%.6f", *c.BudgetLeftUSD)
			}
			if c.WaitSeconds > 0 {
				wait = fmt.Sprintf("%.0fs", c.WaitSeconds)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.6f\t%.6f\t%s\n", g.Gateway, c.Name, aliases, dash(c.RPM), dash(c.TPM),
				wait, c.CloudUSDToday, c.CloudUSDThisMonth, left)
		}
		if g.DailyCapUSD > 0 {
			fmt.Fprintf(tw, "%s\t(all clients)\t\t\t\t\t%.6f of %.2f a day\t\t\n", g.Gateway, g.CloudUSDToday, g.DailyCapUSD)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, g := range out.Gateways {
		if u := g.SpendUnknown; u != nil {
			fmt.Fprintf(cmd.OutOrStdout(), "gateway %s: cloud spend unknown since %s (%s); cloud is closed to the clients with a budget "+
				"and under the spend cap: check %s, then POST /hybrid_llm/spend/accept {\"gateway\":%q}\n",
				g.Gateway, u.Since.Format(time.RFC3339), u.Why, cmp.Or(u.SetAsideAs, "the spend in storage"), g.Gateway)
		}
	}
	return nil
}

func cmdRegistryGet(cmd *cobra.Command, args []string) error {
	gateway, _ := cmd.Flags().GetString("gateway")
	q := url.Values{}
	if gateway != "" {
		q.Set("gateway", gateway)
	}
	if len(args) == 1 {
		q.Set("key", args[0])
	}
	b, err := adminCall(cmd, http.MethodGet, adminapi.PathRegistry+"?"+q.Encode(), nil)
	if err != nil || printJSON(cmd, b) {
		return err
	}
	var doc struct {
		Prefix   string                   `json:"prefix"`
		Revision int64                    `json:"revision"`
		Applied  int64                    `json:"applied_revision"`
		Keys     []adminapi.RegistryEntry `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "prefix %s, revision %d (applied here: %d)\n", doc.Prefix, doc.Revision, doc.Applied)
	for _, e := range doc.Keys {
		var v bytes.Buffer
		if json.Compact(&v, e.Value) != nil {
			v.Write(e.Value)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%-32s %s\n", e.Key, v.String())
	}
	return nil
}

// cmdRegistryWrite puts value under key, or deletes key when value is "".
func cmdRegistryWrite(cmd *cobra.Command, key, value string) error {
	gateway, _ := cmd.Flags().GetString("gateway")
	req := adminapi.RegistryWrite{Gateway: gateway, Key: key, Delete: value == ""}
	if value != "" {
		if !json.Valid([]byte(value)) {
			return fmt.Errorf("the value must be JSON, such as '{\"drained\": true}'")
		}
		req.Value = json.RawMessage(value)
	}
	b, err := adminCall(cmd, http.MethodPost, adminapi.PathRegistry, req)
	if err != nil || printJSON(cmd, b) {
		return err
	}
	var out struct {
		Revision int64 `json:"revision"`
	}
	_ = json.Unmarshal(b, &out)
	verb := "put"
	if req.Delete {
		verb = "deleted"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s at revision %d\n", key, verb, out.Revision)
	return nil
}

// runBare runs `caddy hybrid-llm` without a known subcommand: help, when
// asked for, on stdout with exit status 0; a subcommand missing or
// mistyped is a usage error: usage on stderr, exit status 2.
func runBare(c *cobra.Command, args []string) error {
	if len(args) > 0 && args[0] == "help" {
		if len(args) == 1 {
			return c.Help()
		}
		if sub, rest, err := c.Find(args[1:]); err == nil && sub != c && len(rest) == 0 {
			return sub.Help()
		}
		args = args[1:]
	}
	c.SetOut(c.ErrOrStderr())
	_ = c.Usage()
	return caddycmd.WrapCommandFuncForCobra(func(caddycmd.Flags) (int, error) {
		if len(args) == 0 {
			return 2, fmt.Errorf("hybrid-llm: a subcommand is required")
		}
		return 2, fmt.Errorf("hybrid-llm: unknown subcommand %q", args[0])
	})(c, args)
}

// addSubcommands adds the subcommands and their flags to cmd.
func addSubcommands(cmd *cobra.Command) {
	sub := func(use, short string, run func(*cobra.Command) error) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error { return run(c) }}
		cmd.AddCommand(c)
		return c
	}
	sub("state", "Show the gateways' groups and endpoints", cmdState)
	for _, verb := range []string{"drain", "undrain"} {
		c := sub(verb, strings.ToUpper(verb[:1])+verb[1:]+" a group or one endpoint", func(c *cobra.Command) error {
			return cmdDrain(c, verb)
		})
		c.Flags().String("group", "", "The group")
		c.Flags().String("endpoint", "", "One endpoint of a vllm group (its upstream address)")
	}
	c := sub("drill", "Send one minimal request to each endpoint of each target of an alias", cmdDrill)
	c.Flags().String("alias", "", "The alias")
	c = sub("ledger", "Show the cost comparison of a window", cmdLedger)
	c.Flags().String("window", "1h", "The window, up to 24h")
	sub("clients", "Show the clients, their limits, cloud spend and budget left", cmdClients)
	c = sub("weight", "Set a member's weight in an alias's weighted set (0: no new traffic)", cmdWeight)
	c.Flags().String("alias", "", "The alias")
	c.Flags().String("group", "", "The member's group")
	c.Flags().Int("weight", -1, "The weight")
	reg := &cobra.Command{Use: "registry", Short: "Read and write the registry the gateways share (etcd)"}
	cmd.AddCommand(reg)
	reg.AddCommand(&cobra.Command{Use: "get [key]", Short: "Show the keys under the gateway's prefix, or one", Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error { return cmdRegistryGet(c, args) }})
	reg.AddCommand(&cobra.Command{Use: "put <key> <json>", Short: "Put a group's or an alias's value", Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error { return cmdRegistryWrite(c, args[0], args[1]) }})
	reg.AddCommand(&cobra.Command{Use: "rm <key>", Short: "Delete a group's or an alias's key", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error { return cmdRegistryWrite(c, args[0], "") }})
}
