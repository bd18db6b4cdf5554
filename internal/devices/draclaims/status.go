package draclaims

import (
	"context"
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// Condition types and reasons of the device status multinetd writes
// (KEP-4817).
const (
	ConditionReady        = "Ready"
	ConditionNetworkReady = "NetworkReady"
	ReasonAttached        = "Attached"
	ReasonAttachFailed    = "AttachFailed"
)

// SetReady records in the claim that d is attached: its status.devices[]
// entry gets networkData nd and the conditions Ready and NetworkReady True
// with reason Attached and message msg. Conflicts are retried.
func (c *Client) SetReady(ctx context.Context, d *Device, nd *resourceapi.NetworkDeviceData, msg string) error {
	return c.update(ctx, d, func(s *resourceapi.AllocatedDeviceStatus, gen int64) {
		s.NetworkData = nd
		setConditions(s, metav1.ConditionTrue, ReasonAttached, msg, gen)
	})
}

// SetFailed records in the claim that d's attachment failed: Ready and
// NetworkReady False with reason AttachFailed and message msg; no
// networkData.
func (c *Client) SetFailed(ctx context.Context, d *Device, msg string) error {
	return c.update(ctx, d, func(s *resourceapi.AllocatedDeviceStatus, gen int64) {
		s.NetworkData = nil
		setConditions(s, metav1.ConditionFalse, ReasonAttachFailed, msg, gen)
	})
}

// Clear removes d's entry from the claim's status.devices (DEL). A claim
// that is gone, or was made again (another UID), has nothing to clear.
func (c *Client) Clear(ctx context.Context, d *Device) error {
	return c.update(ctx, d, nil)
}

func setConditions(s *resourceapi.AllocatedDeviceStatus, st metav1.ConditionStatus, reason, msg string, gen int64) {
	if len(msg) > 32768 {
		msg = msg[:32768]
	}
	for _, t := range []string{ConditionReady, ConditionNetworkReady} {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: t, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
}

// update applies edit to d's entry of the claim's status.devices (adding it
// when missing), or removes the entry when edit is nil, and writes the
// status (UpdateStatus, retried on conflict).
func (c *Client) update(ctx context.Context, d *Device, edit func(*resourceapi.AllocatedDeviceStatus, int64)) error {
	claims := c.resource.ResourceClaims(d.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		claim, err := claims.Get(ctx, d.Claim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if claim.UID != d.ClaimUID {
			return ErrNoClaim
		}
		var out []resourceapi.AllocatedDeviceStatus
		var cur *resourceapi.AllocatedDeviceStatus
		for _, s := range claim.Status.Devices {
			if s.Driver == d.Driver && s.Pool == d.Pool && s.Device == d.Name && s.ShareID == nil {
				s := s
				cur = &s
				continue
			}
			out = append(out, s)
		}
		if edit == nil {
			if cur == nil {
				return nil
			}
		} else {
			if cur == nil {
				cur = &resourceapi.AllocatedDeviceStatus{Driver: d.Driver, Pool: d.Pool, Device: d.Name}
			}
			edit(cur, claim.Generation)
			out = append(out, *cur)
		}
		claim.Status.Devices = out
		_, err = claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldManager: "multinetd"})
		return err
	})
	switch {
	case err == nil:
		return nil
	case edit == nil && (apierrors.IsNotFound(err) || errors.Is(err, ErrNoClaim)):
		return nil
	}
	return fmt.Errorf("status of device %s: %w", d, err)
}
