// deppy-bench: the resolution problems of olm-rs's benchmarks, encoded for deppy v0.3.0 (the
// solver upstream operator-controller used) the way olm-rs's resolver reads them, so both
// solve the same problem and must make the same picks.
//
// Usage: deppy-bench CATALOG_DIR REQUESTS_FILE RUNS
//
// REQUESTS_FILE has one request per line: a package name, then optionally a version range.
// It prints one JSON object: the load time, the median build and solve times over RUNS runs
// (build: the variables and constraints from the loaded catalog; solve: deppy's Solve), and
// the chosen bundles. Test infrastructure only: built by bench/compare/compare.sh.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/deppy/pkg/deppy"
	"github.com/operator-framework/deppy/pkg/deppy/constraint"
	"github.com/operator-framework/deppy/pkg/deppy/input"
	"github.com/operator-framework/deppy/pkg/deppy/solver"
	"github.com/operator-framework/operator-registry/alpha/declcfg"
	"github.com/operator-framework/operator-registry/alpha/property"
)

type bundle struct {
	id       deppy.Identifier
	name     string
	pkg      string
	version  semver.Version
	provides []property.GVK
	reqPkgs  []property.PackageRequired
	reqGVKs  []property.GVKRequired
}

type request struct {
	pkg    string
	rng    semver.Range
	ranged bool
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: deppy-bench CATALOG_DIR REQUESTS_FILE RUNS")
		os.Exit(2)
	}
	runs, err := strconv.Atoi(os.Args[3])
	check(err)
	start := time.Now()
	cfg, err := declcfg.LoadFS(context.Background(), os.DirFS(os.Args[1]))
	check(err)
	bundles := parse(cfg)
	load := time.Since(start)
	reqs := readRequests(os.Args[2])

	var builds, solves []time.Duration
	var picks []string
	for i := 0; i < runs; i++ {
		t0 := time.Now()
		vars := build(bundles, reqs)
		t1 := time.Now()
		s, err := solver.New()
		check(err)
		sol, err := s.Solve(vars)
		check(err)
		t2 := time.Now()
		builds = append(builds, t1.Sub(t0))
		solves = append(solves, t2.Sub(t1))
		picks = chosen(sol, bundles)
	}
	out, err := json.Marshal(map[string]any{
		"load_ms":  ms(load),
		"build_ms": ms(median(builds)),
		"solve_ms": ms(median(solves)),
		"bundles":  picks,
	})
	check(err)
	fmt.Println(string(out))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func parse(cfg *declcfg.DeclarativeConfig) map[string][]*bundle {
	byPkg := map[string][]*bundle{}
	for _, b := range cfg.Bundles {
		props, err := property.Parse(b.Properties)
		check(err)
		if len(props.Packages) != 1 {
			continue
		}
		v, err := semver.Parse(props.Packages[0].Version)
		if err != nil {
			continue
		}
		byPkg[b.Package] = append(byPkg[b.Package], &bundle{
			id:       deppy.Identifier(b.Package + "/" + b.Name),
			name:     b.Name,
			pkg:      b.Package,
			version:  v,
			provides: props.GVKs,
			reqPkgs:  props.PackagesRequired,
			reqGVKs:  props.GVKsRequired,
		})
	}
	// olm-rs's preference with one catalog: the highest version first.
	for _, bs := range byPkg {
		sort.SliceStable(bs, func(i, j int) bool { return bs[i].version.GT(bs[j].version) })
	}
	return byPkg
}

func readRequests(path string) []request {
	f, err := os.Open(path)
	check(err)
	defer f.Close()
	var reqs []request
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		r := request{pkg: fields[0]}
		if len(fields) > 1 {
			rng, err := semver.ParseRange(strings.Join(fields[1:], " "))
			check(err)
			r.rng, r.ranged = rng, true
		}
		reqs = append(reqs, r)
	}
	check(sc.Err())
	return reqs
}

// build encodes the problem as olm-rs's resolver reads it: each request is a mandatory
// variable depending on its package's bundles in the range (highest first); only requested
// packages offer bundles; at most one bundle per package and one provider per GVK; a bundle
// depends on the bundles of each package it requires (in range) and on a provider of each
// GVK it requires.
func build(byPkg map[string][]*bundle, reqs []request) []deppy.Variable {
	requested := map[string]bool{}
	for _, r := range reqs {
		requested[r.pkg] = true
	}
	providers := map[property.GVK][]deppy.Identifier{}
	for pkg := range requested {
		for _, b := range byPkg[pkg] {
			for _, g := range b.provides {
				providers[g] = append(providers[g], b.id)
			}
		}
	}
	var vars []deppy.Variable
	for i, r := range reqs {
		var ids []deppy.Identifier
		for _, b := range byPkg[r.pkg] {
			if !r.ranged || r.rng(b.version) {
				ids = append(ids, b.id)
			}
		}
		vars = append(vars, input.NewSimpleVariable(
			deppy.Identifier(fmt.Sprintf("request/%d", i)),
			constraint.Mandatory(), constraint.Dependency(ids...)))
	}
	pkgs := make([]string, 0, len(requested))
	for pkg := range requested {
		pkgs = append(pkgs, pkg)
	}
	sort.Strings(pkgs)
	for _, pkg := range pkgs {
		var ids []deppy.Identifier
		for _, b := range byPkg[pkg] {
			ids = append(ids, b.id)
			var cs []deppy.Constraint
			for _, d := range b.reqPkgs {
				rng, err := semver.ParseRange(d.VersionRange)
				check(err)
				var dep []deppy.Identifier
				if requested[d.PackageName] {
					for _, c := range byPkg[d.PackageName] {
						if rng(c.version) {
							dep = append(dep, c.id)
						}
					}
				}
				cs = append(cs, constraint.Dependency(dep...))
			}
			for _, g := range b.reqGVKs {
				key := property.GVK{Group: g.Group, Version: g.Version, Kind: g.Kind}
				cs = append(cs, constraint.Dependency(providers[key]...))
			}
			vars = append(vars, input.NewSimpleVariable(b.id, cs...))
		}
		vars = append(vars, input.NewSimpleVariable(
			deppy.Identifier("package/"+pkg), constraint.AtMost(1, ids...)))
	}
	gvks := make([]property.GVK, 0, len(providers))
	for g := range providers {
		gvks = append(gvks, g)
	}
	sort.Slice(gvks, func(i, j int) bool { return gvkName(gvks[i]) < gvkName(gvks[j]) })
	for _, g := range gvks {
		vars = append(vars, input.NewSimpleVariable(
			deppy.Identifier("gvk/"+gvkName(g)), constraint.AtMost(1, providers[g]...)))
	}
	return vars
}

func chosen(sol []deppy.Variable, byPkg map[string][]*bundle) []string {
	names := map[deppy.Identifier]string{}
	for _, bs := range byPkg {
		for _, b := range bs {
			names[b.id] = b.name
		}
	}
	var picks []string
	for _, v := range sol {
		if n, ok := names[v.Identifier()]; ok {
			picks = append(picks, n)
		}
	}
	sort.Strings(picks)
	return picks
}

func gvkName(g property.GVK) string { return g.Group + "/" + g.Version + "/" + g.Kind }
