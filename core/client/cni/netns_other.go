//go:build !linux

package cni

import "errors"

var errNoNetns = errors.New("network namespaces exist on Linux only")

func createNetns(string) error { return errNoNetns }
func removeNetns(string) error { return nil }
func isNetns(string) bool      { return false }
func supported() error         { return errNoNetns }
