"""A seeded fault campaign: many faults in one long run, planned before launch, judged against the plan."""
