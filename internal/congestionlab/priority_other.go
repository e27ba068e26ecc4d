//go:build !linux

package congestionlab

import "errors"

func boostPriority(int) error {
	return errors.New("congestionlab: thread priorities are only set on Linux")
}
