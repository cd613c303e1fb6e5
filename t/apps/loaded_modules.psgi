# Answers with the modules loaded in the process that serves the request
# (%INC), one a line.
sub { [200, ['Content-Type' => 'text/plain'], [join("\n", sort keys %INC), "\n"]] };
