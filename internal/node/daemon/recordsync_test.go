package daemon

import (
	"strings"
	"testing"
)

// recordSync accepts "", "background" and "each"; anything else fails
// Complete naming the field and the accepted values.
func TestCompleteRecordSync(t *testing.T) {
	for _, v := range []string{"", "background", "each"} {
		c := Defaults()
		c.NodeName = "node-a"
		c.RecordSync = v
		if err := c.Complete(); err != nil {
			t.Errorf("recordSync %q: %v", v, err)
		}
	}
	c := Defaults()
	c.NodeName = "node-a"
	c.RecordSync = "always"
	err := c.Complete()
	if err == nil {
		t.Fatal(`recordSync "always" accepted`)
	}
	for _, want := range []string{"recordSync", `"always"`, `"background"`, `"each"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %s", err, want)
		}
	}
}
