package main

import (
	"context"
	"fmt"
	"time"
)

// policyMaxLate is how many changes may miss policyWithin before the
// phase stops changing labels (each would wait that long).
const policyMaxLate = 3

// policyChanges times o.policy.changes label changes (policy.go): a
// mover into group k, then back to idle, k and the mover turning. It also
// counts multinetd's CPU time over them, less its idle rate.
func (b *bench) policyChanges(ctx context.Context, pods []*policyPod) error {
	r := &b.res.policy
	po := b.o.policy
	var movers []*policyPod
	for _, p := range pods {
		if p.group < 0 {
			movers = append(movers, p)
		}
	}
	idle, err := b.idleCPURate(5 * time.Second)
	if err != nil {
		return err
	}
	logf("policy: %d label changes (multinetd's idle CPU %.2f ms/s)", po.changes, idle*1000)
	cpu0, err := readProcCPU(b.pid)
	if err != nil {
		return err
	}
	start := time.Now()
	done := 0
	for i := 0; i < po.changes && r.late < policyMaxLate; i++ {
		m, k, to := movers[(i/2)%len(movers)], (i/2)%po.count, (i/2)%po.count
		if i%2 == 1 {
			to = -1
		}
		if err := b.timeChange(ctx, pods, m, k, to); err != nil {
			return err
		}
		done++
		time.Sleep(b.o.pause)
	}
	cpu1, err := readProcCPU(b.pid)
	if err != nil {
		return err
	}
	busy := cpu1.self - cpu0.self - time.Duration(idle*float64(time.Since(start)))
	r.cpuPerChange = max(busy, 0) / time.Duration(done)
	logf("policy: label change → rules in place: moved pod %s; every affected pod %s; %d late; multinetd CPU %s ms per change",
		r.toSelf.triple(), r.toAll.triple(), r.late, ms(r.cpuPerChange))
	return nil
}

// idleCPURate is multinetd's CPU time per second over window d with
// nothing happening.
func (b *bench) idleCPURate(d time.Duration) (float64, error) {
	a, err := readProcCPU(b.pid)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	time.Sleep(d)
	c, err := readProcCPU(b.pid)
	if err != nil {
		return 0, err
	}
	return (c.self - a.self).Seconds() / time.Since(start).Seconds(), nil
}

// timeChange moves m to group to (-1: idle; k: the group whose peers the
// change affects) and times, from just before the PATCH, until m's table
// is there (or gone) and until every affected pod's table changed.
func (b *bench) timeChange(ctx context.Context, pods []*policyPod, m *policyPod, k, to int) error {
	r := &b.res.policy
	peers := affected(pods, k, b.o.policy.count)
	before := make(map[*policyPod]string, len(peers))
	for _, p := range peers {
		st, err := readTable(p.netns)
		if err != nil {
			return err
		}
		before[p] = st.fingerprint
	}
	start := time.Now()
	if err := b.patchGroup(ctx, m.name, groupName(to)); err != nil {
		return fmt.Errorf("label pod %s: %w", m.name, err)
	}
	m.group = to
	var self time.Duration
	for time.Since(start) < policyWithin {
		if self == 0 {
			st, err := readTable(m.netns)
			if err != nil {
				return err
			}
			if st.present == (to >= 0) {
				self = time.Since(start)
			}
		}
		for p, fp := range before {
			st, err := readTable(p.netns)
			if err != nil {
				return err
			}
			if st.fingerprint != fp {
				delete(before, p)
			}
		}
		if self != 0 && len(before) == 0 {
			r.toSelf, r.toAll = append(r.toSelf, self), append(r.toAll, time.Since(start))
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.late++
	logf("policy: moving %s to %s: rules not in place within %v (moved pod done: %v; %d of %d affected pods unchanged)",
		m.name, groupName(to), policyWithin, self != 0, len(before), len(peers))
	return nil
}

// policyAdds times ADDs of a pod the policies select (group 0) and of an
// idle one, alternated, each on a fresh sandbox (then DEL).
func (b *bench) policyAdds(ctx context.Context) error {
	r := &b.res.policy
	groups := []string{groupName(0), policyIdle}
	refs, err := b.c.createPodsNamed(ctx, []string{"mnp-add-selected", "mnp-add-idle"}, func(i int) map[string]string {
		return map[string]string{policyGroupLabel: groups[i]}
	}, b.nets[0].name+","+b.nets[1].name)
	if err != nil {
		return err
	}
	logf("policy: %d ADDs each of a selected and an unselected pod", b.o.policy.adds)
	for i := range 2 * b.o.policy.adds {
		add, _, _, _, err := b.once(ctx, b.multinet, refs[i%2])
		if err != nil {
			return err
		}
		if i%2 == 0 {
			r.addSelected = append(r.addSelected, add)
		} else {
			r.addIdle = append(r.addIdle, add)
		}
	}
	return nil
}
