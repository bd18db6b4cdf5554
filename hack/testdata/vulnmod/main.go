// Command vulnmod calls golang.org/x/text/language.Parse, vulnerable in
// v0.3.5 (GO-2021-0113): govulncheck's test case for a reachable
// vulnerability.
package main

import (
	"fmt"
	"os"

	"golang.org/x/text/language"
)

func main() {
	tag, err := language.Parse(os.Args[len(os.Args)-1])
	fmt.Println(tag, err)
}
