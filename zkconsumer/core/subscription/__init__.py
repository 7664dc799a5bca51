"""A member's subscription: ``topic_filter`` (whitelists and blacklists, compiled from Java regexes by
``java_regex``) and ``topic_count`` (the thread ids a registration asks for, per topic). Pure."""
