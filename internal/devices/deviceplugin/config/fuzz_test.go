package config

import "testing"

// FuzzParse: Parse never panics, and whatever it accepts validates again
// (Validate is idempotent) with every pool having exactly one selector.
func FuzzParse(f *testing.F) {
	f.Add([]byte(exampleYAML))
	f.Add([]byte(`{"pools":[{"resourceName":"example.com/a","netdev":{"names":["mnt0"],"patterns":["eth[0-9]"]}}]}`))
	f.Add([]byte("pools:\n- resourceName: example.com/a\n  memif: {dir: /d, slots: 1, role: master, mode: ip, containerPath: /c}"))
	f.Add([]byte("pools: [{resourceName: a.b/c, pci: {vendors: ['0x8086'], addresses: ['0000:00:00.0']}}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate again: %v", err)
		}
		for i := range c.Pools {
			if c.Pools[i].Kind() == "" {
				t.Fatalf("pools[%d] has no selector", i)
			}
		}
	})
}
