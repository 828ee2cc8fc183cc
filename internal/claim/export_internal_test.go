package claim

// DeliveryWaiting is the status of a delivery waiting for the routes it
// runs after (see DeliveryStatus), which only the store's SQL writes; the
// package's tests compare with it.
const DeliveryWaiting DeliveryStatus = "waiting"
