"""noe report's pure part: what could run on each architecture, prices, the plan, PolicyReports."""
