"""The scenario model: resolved scenarios, their rules, a campaign's plan, a fault scenario's length.

The scenario model: config + schema defaults -> resolved scenarios, their cross-field rules, the seeded
campaign's plan and settings, and how long a fault scenario must train."""
