"""What an experiment is: errors, ids, settings, the field table, the model, the
values derived over a campaign, the noise statistics, bounded input. Imports no other
package of kexp.
"""
