// A module that calls a known-vulnerable symbol on purpose: golang.org/x/text
// v0.3.5's language.Parse (GO-2021-0113, fixed in v0.3.7). hack/govulncheck.sh
// must report it and fail (hack/tools/vulncheck TestReportsReachableVulnerability).
// Never built into multinet: testdata directories are outside ./...
module example.com/vulnmod

go 1.22

require golang.org/x/text v0.3.5
