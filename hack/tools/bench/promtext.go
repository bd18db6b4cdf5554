package main

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// sample is one line of the Prometheus text exposition format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseProm parses the samples of a Prometheus text exposition (comments
// and malformed lines are skipped; the bench only sums counters).
func parseProm(data []byte) []sample {
	var out []sample
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parsePromLine(line)
		if err != nil {
			continue
		}
		out = append(out, s)
	}
	return out
}

func parsePromLine(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, fmt.Errorf("no name")
	}
	s.name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if rest == "" {
				return s, fmt.Errorf("unterminated labels")
			}
			if rest[0] == '}' {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq <= 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return s, fmt.Errorf("bad label")
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var b strings.Builder
			j := 0
			for ; j < len(rest); j++ {
				c := rest[j]
				if c == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						b.WriteByte('\n')
					default:
						b.WriteByte(rest[j])
					}
					continue
				}
				if c == '"' {
					break
				}
				b.WriteByte(c)
			}
			if j >= len(rest) {
				return s, fmt.Errorf("unterminated label value")
			}
			s.labels[key] = b.String()
			rest = rest[j+1:]
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

// sumWhere sums the samples named name whose labels satisfy keep.
func sumWhere(samples []sample, name string, keep func(map[string]string) bool) float64 {
	var t float64
	for _, s := range samples {
		if s.name == name && (keep == nil || keep(s.labels)) {
			t += s.value
		}
	}
	return t
}
