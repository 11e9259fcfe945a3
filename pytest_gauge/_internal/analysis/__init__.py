"""Numbers from records, all pure: suite metrics with intervals, Bradley-Terry Elo, gate expressions and
the data source they are evaluated against."""
