package ingest

import (
	"github.com/labstack/echo-contrib/echoprometheus"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// routes lists every endpoint ingest serves.
func (s *Server) routes(reg *prometheus.Registry) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(echoprometheus.NewMiddlewareWithConfig(echoprometheus.MiddlewareConfig{
		Namespace:                 "hookgate",
		Subsystem:                 "ingest",
		Registerer:                reg,
		DoNotUseRequestPathFor404: true,
		// The Host header is the client's to choose: as a label it would let
		// anyone grow the series count. One ingest serves one host anyway.
		// The method, likewise, is bucketed to a fixed set; url is the route
		// template (404s share one value), never the raw path.
		LabelFuncs: map[string]echoprometheus.LabelValueFunc{
			"host":   func(echo.Context, error) string { return "" },
			"method": func(c echo.Context, _ error) string { return methodLabel(c.Request().Method) },
		},
	}))

	e.POST("/webhooks/:provider", s.handleWebhook)
	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	e.GET("/metrics", echoprometheus.NewHandlerWithConfig(echoprometheus.HandlerConfig{Gatherer: reg}))
	return e
}
