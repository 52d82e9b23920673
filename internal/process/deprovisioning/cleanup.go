package deprovisioning

import "errors"

// errStillThere is what a cleanup step reports while a system is still removing an object: it
// keeps retrying within the cleanup window like after any other failure.
var errStillThere = errors.New("still being deleted")
